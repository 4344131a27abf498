// ZynBook WGSL for kernel `mul_add` (thread: one thread per iteration of (i) (generic: threads=256, chunk=0, every size))

struct ZynParams {
    u_len: i32,
    u_x_d0: i32,
    u_y_d0: i32,
}

@group(0) @binding(0) var<storage, read> u_x: array<f32>;
@group(0) @binding(1) var<storage, read> u_y: array<f32>;
@group(0) @binding(2) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(3) var<uniform> zyn_p: ZynParams;

// one thread per iteration of (i)
@compute @workgroup_size(256)
fn zyn_k_mul_add(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_len: i32 = zyn_p.u_len;
    let u_x_d0: i32 = zyn_p.u_x_d0;
    let u_y_d0: i32 = zyn_p.u_y_d0;
    // line 3: for i in 0..len:
    let _n0: i32 = max(u_len, 0i);
    for (var _g: i32 = ((zyn_block * 256i) + zyn_thread); _g < _n0; _g += (zyn_blocks * 256i)) {
        let u_i: i32 = _g;
        // line 4: out[i] = x[i] * y[i] + 1.0
        u_out[u_i] = ((u_x[u_i] * u_y[u_i]) + 1.0f);
    }
}

