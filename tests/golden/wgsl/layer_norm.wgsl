// layer_norm: @kernel fused -- WGSL schedule `rows`, ZynML line 1

struct Params {
    batch: i32,
    beta_d0: i32,
    gamma_d0: i32,
    hidden: i32,
    x_d0: i32,
    x_d1: i32,
    eps: f32,
    out_d0: i32,
    out_d1: i32,
    z_n_b: i32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;  // x: f32
@group(0) @binding(1) var<storage, read> gamma: array<f32>;  // gamma: f32
@group(0) @binding(2) var<storage, read> beta: array<f32>;  // beta: f32
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(4) var<uniform> P: Params;

var<workgroup> z_red_f32: array<f32, 256>;

@compute @workgroup_size(256, 1, 1)
fn layer_norm(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    if (z_wid >= P.z_n_b) { return; }
    // one workgroup per iteration of the parallel loops b
    var z_r1: i32 = z_wid;
    let z_b_it2: i32 = z_r1 % P.z_n_b;
    z_r1 = z_r1 / P.z_n_b;
    // line 4: for b in 0..batch:
    let b: i32 = 0i + z_b_it2 * 1i;
    // line 5: var mean = 0.0
    var mean: f32 = 0.0f;
    // line 6: for i in 0..hidden:
    var z_mean_part3: f32 = 0.0f;
    // the i loop is split over the workgroup's 256 invocations
    for (var i: i32 = 0i + i32(z_lid.x) * 1i; i < P.hidden; i = i + 256i) {
        // line 7: mean += x[b, i]
        z_mean_part3 = (z_mean_part3 + x[(b) * P.x_d1 + i]);
    }
    z_red_f32[z_lid.x] = z_mean_part3;
    workgroupBarrier();
    for (var z_s: u32 = 128u; z_s > 0u; z_s = z_s >> 1u) {
        if (z_lid.x < z_s) {
            z_red_f32[z_lid.x] = z_red_f32[z_lid.x] + z_red_f32[z_lid.x + z_s];
        }
        workgroupBarrier();
    }
    mean = mean + z_red_f32[0];
    workgroupBarrier();
    // line 8: mean /= hidden
    mean = (mean / f32(P.hidden));
    // line 9: var var = 0.0
    var var_: f32 = 0.0f;
    // line 10: for i in 0..hidden:
    var z_var__part4: f32 = 0.0f;
    // the i_2 loop is split over the workgroup's 256 invocations
    for (var i_2: i32 = 0i + i32(z_lid.x) * 1i; i_2 < P.hidden; i_2 = i_2 + 256i) {
        // line 11: let diff = x[b, i] - mean
        let diff: f32 = (x[(b) * P.x_d1 + i_2] - mean);
        // line 12: var += diff * diff
        z_var__part4 = (z_var__part4 + (diff * diff));
    }
    z_red_f32[z_lid.x] = z_var__part4;
    workgroupBarrier();
    for (var z_s: u32 = 128u; z_s > 0u; z_s = z_s >> 1u) {
        if (z_lid.x < z_s) {
            z_red_f32[z_lid.x] = z_red_f32[z_lid.x] + z_red_f32[z_lid.x + z_s];
        }
        workgroupBarrier();
    }
    var_ = var_ + z_red_f32[0];
    workgroupBarrier();
    // line 13: var /= hidden
    var_ = (var_ / f32(P.hidden));
    // line 14: let inv_std = rsqrt(var + eps)
    let inv_std: f32 = inverseSqrt((var_ + P.eps));
    // line 15: for i in 0..hidden:
    // the i_3 loop is split over the workgroup's 256 invocations
    for (var i_3: i32 = 0i + i32(z_lid.x) * 1i; i_3 < P.hidden; i_3 = i_3 + 256i) {
        // line 16: out[b, i] = (x[b, i] - mean) * inv_std * gamma[i] + beta[i]
        out[(b) * P.out_d1 + i_3] = ((((x[(b) * P.x_d1 + i_3] - mean) * inv_std) * gamma[i_3]) + beta[i_3]);
    }
    storageBarrier();
    workgroupBarrier();
}
