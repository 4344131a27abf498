// ZynBook WGSL for kernel `layer_norm` (block: one block of 256 threads per iteration of (b) (block: threads=256))

struct ZynParams {
    u_eps: f32,
    u_batch: i32,
    u_beta_d0: i32,
    u_gamma_d0: i32,
    u_hidden: i32,
    u_x_d0: i32,
    u_x_d1: i32,
}

@group(0) @binding(0) var<storage, read> u_x: array<f32>;
@group(0) @binding(1) var<storage, read> u_gamma: array<f32>;
@group(0) @binding(2) var<storage, read> u_beta: array<f32>;
@group(0) @binding(3) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(4) var<uniform> zyn_p: ZynParams;

var<workgroup> _tree_part1: array<f32, 256>;
var<workgroup> _tree_part2: array<f32, 256>;

// block: one block of 256 threads per iteration of (b)
@compute @workgroup_size(256)
fn zyn_k_layer_norm(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_eps: f32 = zyn_p.u_eps;
    let u_batch: i32 = zyn_p.u_batch;
    let u_beta_d0: i32 = zyn_p.u_beta_d0;
    let u_gamma_d0: i32 = zyn_p.u_gamma_d0;
    let u_hidden: i32 = zyn_p.u_hidden;
    let u_x_d0: i32 = zyn_p.u_x_d0;
    let u_x_d1: i32 = zyn_p.u_x_d1;
    // _tree_part1: workgroup memory, declared above
    // _tree_part2: workgroup memory, declared above
    // line 4: for b in 0..batch:
    for (var _b: i32 = zyn_block; _b < 37i; _b += zyn_blocks) {
        let u_b: i32 = _b;
        // line 5: var mean = 0.0
        var u_mean: f32 = 0.0f;
        // line 6: for i in 0..hidden:
        var _part1: f32 = 0.0f;
        for (var u_i: i32 = (0i + (zyn_thread * 1i)); u_i < u_hidden; u_i += (1i * 256i)) {
            // line 7: mean += x[b, i]
            _part1 = (_part1 + u_x[((u_b * u_x_d1) + u_i)]);
        }
        _tree_part1[zyn_thread] = _part1;
        workgroupBarrier();
        if (((zyn_thread < 128i) && ((zyn_thread + 128i) < 256i))) {
            _tree_part1[zyn_thread] = (_tree_part1[zyn_thread] + _tree_part1[(zyn_thread + 128i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 64i) && ((zyn_thread + 64i) < 256i))) {
            _tree_part1[zyn_thread] = (_tree_part1[zyn_thread] + _tree_part1[(zyn_thread + 64i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 32i) && ((zyn_thread + 32i) < 256i))) {
            _tree_part1[zyn_thread] = (_tree_part1[zyn_thread] + _tree_part1[(zyn_thread + 32i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 16i) && ((zyn_thread + 16i) < 256i))) {
            _tree_part1[zyn_thread] = (_tree_part1[zyn_thread] + _tree_part1[(zyn_thread + 16i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 8i) && ((zyn_thread + 8i) < 256i))) {
            _tree_part1[zyn_thread] = (_tree_part1[zyn_thread] + _tree_part1[(zyn_thread + 8i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 4i) && ((zyn_thread + 4i) < 256i))) {
            _tree_part1[zyn_thread] = (_tree_part1[zyn_thread] + _tree_part1[(zyn_thread + 4i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 2i) && ((zyn_thread + 2i) < 256i))) {
            _tree_part1[zyn_thread] = (_tree_part1[zyn_thread] + _tree_part1[(zyn_thread + 2i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 1i) && ((zyn_thread + 1i) < 256i))) {
            _tree_part1[zyn_thread] = (_tree_part1[zyn_thread] + _tree_part1[(zyn_thread + 1i)]);
        }
        workgroupBarrier();
        _part1 = _tree_part1[0i];
        u_mean = (u_mean + _part1);
        // line 8: mean /= hidden
        u_mean = (u_mean / f32(u_hidden));
        // line 9: var var = 0.0
        var u_var: f32 = 0.0f;
        // line 10: for i in 0..hidden:
        var _part2: f32 = 0.0f;
        for (var u_i_2: i32 = (0i + (zyn_thread * 1i)); u_i_2 < u_hidden; u_i_2 += (1i * 256i)) {
            // line 11: let diff = x[b, i] - mean
            let u_diff: f32 = (u_x[((u_b * u_x_d1) + u_i_2)] - u_mean);
            // line 12: var += diff * diff
            _part2 = (_part2 + (u_diff * u_diff));
        }
        _tree_part2[zyn_thread] = _part2;
        workgroupBarrier();
        if (((zyn_thread < 128i) && ((zyn_thread + 128i) < 256i))) {
            _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 128i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 64i) && ((zyn_thread + 64i) < 256i))) {
            _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 64i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 32i) && ((zyn_thread + 32i) < 256i))) {
            _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 32i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 16i) && ((zyn_thread + 16i) < 256i))) {
            _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 16i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 8i) && ((zyn_thread + 8i) < 256i))) {
            _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 8i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 4i) && ((zyn_thread + 4i) < 256i))) {
            _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 4i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 2i) && ((zyn_thread + 2i) < 256i))) {
            _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 2i)]);
        }
        workgroupBarrier();
        if (((zyn_thread < 1i) && ((zyn_thread + 1i) < 256i))) {
            _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 1i)]);
        }
        workgroupBarrier();
        _part2 = _tree_part2[0i];
        u_var = (u_var + _part2);
        // line 13: var /= hidden
        u_var = (u_var / f32(u_hidden));
        // line 14: let inv_std = rsqrt(var + eps)
        let u_inv_std: f32 = (1.0f / sqrt((u_var + u_eps)));
        // line 15: for i in 0..hidden:
        for (var u_i_3: i32 = (0i + (zyn_thread * 1i)); u_i_3 < u_hidden; u_i_3 += (1i * 256i)) {
            // line 16: out[b, i] = (x[b, i] - mean) * inv_std * gamma[i] + beta[i]
            u_out[((u_b * u_hidden) + u_i_3)] = ((((u_x[((u_b * u_x_d1) + u_i_3)] - u_mean) * u_inv_std) * u_gamma[u_i_3]) + u_beta[u_i_3]);
        }
        workgroupBarrier();
    }
}

