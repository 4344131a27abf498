// attention: @kernel attention -- WGSL schedule `rows`, ZynML line 1

struct Params {
    K_d0: i32,
    K_d1: i32,
    K_d2: i32,
    K_d3: i32,
    Q_d0: i32,
    Q_d1: i32,
    Q_d2: i32,
    Q_d3: i32,
    V_d0: i32,
    V_d1: i32,
    V_d2: i32,
    V_d3: i32,
    batch: i32,
    head_dim: i32,
    heads: i32,
    mask_d0: i32,
    mask_d1: i32,
    seq_len: i32,
    out_d0: i32,
    out_d1: i32,
    out_d2: i32,
    out_d3: i32,
    z_n_b: i32,
    z_n_h: i32,
    z_n_i: i32,
}

@group(0) @binding(0) var<storage, read> Q: array<f32>;  // Q: f32
@group(0) @binding(1) var<storage, read> K: array<f32>;  // K: f32
@group(0) @binding(2) var<storage, read> V: array<f32>;  // V: f32
@group(0) @binding(3) var<storage, read> mask: array<u32>;  // mask: bool
@group(0) @binding(4) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(5) var<uniform> P: Params;

var<workgroup> z_red_f32: array<f32, 256>;

@compute @workgroup_size(256, 1, 1)
fn attention(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    if (z_wid >= P.z_n_b * P.z_n_h * P.z_n_i) { return; }
    // one workgroup per iteration of the parallel loops b, h, i
    var z_r1: i32 = z_wid;
    let z_i_it2: i32 = z_r1 % P.z_n_i;
    z_r1 = z_r1 / P.z_n_i;
    let z_h_it3: i32 = z_r1 % P.z_n_h;
    z_r1 = z_r1 / P.z_n_h;
    let z_b_it4: i32 = z_r1 % P.z_n_b;
    z_r1 = z_r1 / P.z_n_b;
    // line 4: for b in 0..batch, h in 0..heads, i in 0..seq_len:
    let b: i32 = 0i + z_b_it4 * 1i;
    // line 4: for b in 0..batch, h in 0..heads, i in 0..seq_len:
    let h: i32 = 0i + z_h_it3 * 1i;
    // line 4: for b in 0..batch, h in 0..heads, i in 0..seq_len:
    let i: i32 = 0i + z_i_it2 * 1i;
    // line 5: var max_score = -inf
    var max_score: f32 = bitcast<f32>(0xff800000u);
    // line 6: for j in 0..seq_len:
    var z_max_score_part5: f32 = bitcast<f32>(0xff800000u);
    // the j loop is split over the workgroup's 256 invocations
    for (var j: i32 = 0i + i32(z_lid.x) * 1i; j < P.seq_len; j = j + 256i) {
        // line 7: if mask[i, j]:
        if ((mask[(i) * P.mask_d1 + j] != 0u)) {
            // line 8: let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
            var z_dot6: f32 = 0.0f;
            for (var z_d7: i32 = 0i; z_d7 < P.Q_d3; z_d7 = z_d7 + 1i) {
                z_dot6 = z_dot6 + Q[(((b) * P.Q_d1 + h) * P.Q_d2 + i) * P.Q_d3 + z_d7] * K[(((b) * P.K_d1 + h) * P.K_d2 + j) * P.K_d3 + z_d7];
            }
            let score: f32 = (z_dot6 / sqrt(f32(P.head_dim)));
            // line 9: max_score = max(max_score, score)
            z_max_score_part5 = max(z_max_score_part5, score);
        }
    }
    z_red_f32[z_lid.x] = z_max_score_part5;
    workgroupBarrier();
    for (var z_s: u32 = 128u; z_s > 0u; z_s = z_s >> 1u) {
        if (z_lid.x < z_s) {
            z_red_f32[z_lid.x] = max(z_red_f32[z_lid.x], z_red_f32[z_lid.x + z_s]);
        }
        workgroupBarrier();
    }
    max_score = max(max_score, z_red_f32[0]);
    workgroupBarrier();
    // line 10: var sum_exp = 0.0
    var sum_exp: f32 = 0.0f;
    // line 11: for j in 0..seq_len:
    var z_sum_exp_part8: f32 = 0.0f;
    // the j_2 loop is split over the workgroup's 256 invocations
    for (var j_2: i32 = 0i + i32(z_lid.x) * 1i; j_2 < P.seq_len; j_2 = j_2 + 256i) {
        // line 12: if mask[i, j]:
        if ((mask[(i) * P.mask_d1 + j_2] != 0u)) {
            // line 13: let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
            var z_dot9: f32 = 0.0f;
            for (var z_d10: i32 = 0i; z_d10 < P.Q_d3; z_d10 = z_d10 + 1i) {
                z_dot9 = z_dot9 + Q[(((b) * P.Q_d1 + h) * P.Q_d2 + i) * P.Q_d3 + z_d10] * K[(((b) * P.K_d1 + h) * P.K_d2 + j_2) * P.K_d3 + z_d10];
            }
            let score_2: f32 = (z_dot9 / sqrt(f32(P.head_dim)));
            // line 14: sum_exp += exp(score - max_score)
            z_sum_exp_part8 = (z_sum_exp_part8 + exp((score_2 - max_score)));
        }
    }
    z_red_f32[z_lid.x] = z_sum_exp_part8;
    workgroupBarrier();
    for (var z_s: u32 = 128u; z_s > 0u; z_s = z_s >> 1u) {
        if (z_lid.x < z_s) {
            z_red_f32[z_lid.x] = z_red_f32[z_lid.x] + z_red_f32[z_lid.x + z_s];
        }
        workgroupBarrier();
    }
    sum_exp = sum_exp + z_red_f32[0];
    workgroupBarrier();
    // line 15: for d in 0..head_dim:
    // the d loop is split over the workgroup's 256 invocations
    for (var d: i32 = 0i + i32(z_lid.x) * 1i; d < P.head_dim; d = d + 256i) {
        // line 16: var acc = 0.0
        var acc: f32 = 0.0f;
        // line 17: for j in 0..seq_len:
        for (var j_3: i32 = 0i; j_3 < P.seq_len; j_3 = j_3 + 1i) {
            // line 18: if mask[i, j]:
            if ((mask[(i) * P.mask_d1 + j_3] != 0u)) {
                // line 19: let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                var z_dot11: f32 = 0.0f;
                for (var z_d12: i32 = 0i; z_d12 < P.Q_d3; z_d12 = z_d12 + 1i) {
                    z_dot11 = z_dot11 + Q[(((b) * P.Q_d1 + h) * P.Q_d2 + i) * P.Q_d3 + z_d12] * K[(((b) * P.K_d1 + h) * P.K_d2 + j_3) * P.K_d3 + z_d12];
                }
                let score_3: f32 = (z_dot11 / sqrt(f32(P.head_dim)));
                // line 20: let weight = exp(score - max_score) / sum_exp
                let weight: f32 = (exp((score_3 - max_score)) / sum_exp);
                // line 21: acc += weight * V[b, h, j, d]
                acc = (acc + (weight * V[(((b) * P.V_d1 + h) * P.V_d2 + j_3) * P.V_d3 + d]));
            }
        }
        // line 22: out[b, h, i, d] = acc
        out[(((b) * P.out_d1 + h) * P.out_d2 + i) * P.out_d3 + d] = acc;
    }
    storageBarrier();
    workgroupBarrier();
}
