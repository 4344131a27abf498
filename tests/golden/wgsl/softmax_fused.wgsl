// softmax_fused: @kernel fused -- WGSL schedule `generic`, ZynML line 1
// note: the rows schedule does not fit (no parallel loop to give one workgroup per iteration); using the next one

struct Params {
    logits_d0: i32,
    out_d0: i32,
    z_total: i32,
    z_off_shifted: i32,
    z_slot_f32: i32,
    z_off_exp_vals: i32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;  // logits: f32
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(2) var<storage, read_write> z_scratch_f32: array<f32>;
@group(0) @binding(3) var<uniform> P: Params;

fn z_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// max and min propagate NaN, as numpy's maximum and minimum do
fn z_max_f32(a: f32, b: f32) -> f32 {
    if (z_isnan_f32(a) || z_isnan_f32(b)) { return a + b; } return max(a, b); }
fn z_min_f32(a: f32, b: f32) -> f32 {
    if (z_isnan_f32(a) || z_isnan_f32(b)) { return a + b; } return min(a, b); }

@compute @workgroup_size(256, 1, 1)
fn softmax_fused(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_slot: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y) * 256i + i32(z_lid.x);
    if (z_slot >= P.z_total) { return; }
    // no parallel loop: one invocation runs the whole block
    // line 3: let max_val = reduce(max, logits)
    var z_red1: f32 = bitcast<f32>(0xff800000u);
    for (var z_r2: i32 = 0i; z_r2 < P.logits_d0; z_r2 = z_r2 + 1i) {
        z_red1 = z_max_f32(z_red1, logits[z_r2]);
    }
    let max_val: f32 = z_red1;
    // line 4: let shifted = logits - max_val
    var z_shifted_n3: i32 = P.logits_d0;
    for (var z_e4: i32 = 0i; z_e4 < z_shifted_n3; z_e4 = z_e4 + 1i) {
        z_scratch_f32[(z_slot * P.z_slot_f32 + P.z_off_shifted) + z_e4] = f32((logits[z_e4] - max_val));
    }
    // line 5: let exp_vals = exp(shifted)
    var z_exp_vals_n5: i32 = z_shifted_n3;
    for (var z_e6: i32 = 0i; z_e6 < z_exp_vals_n5; z_e6 = z_e6 + 1i) {
        z_scratch_f32[(z_slot * P.z_slot_f32 + P.z_off_exp_vals) + z_e6] = f32(exp(z_scratch_f32[(z_slot * P.z_slot_f32 + P.z_off_shifted) + min(z_e6, z_shifted_n3 - 1i)]));
    }
    // line 6: let sum_exp = reduce(+, exp_vals)
    var z_red7: f32 = 0.0f;
    for (var z_r8: i32 = 0i; z_r8 < z_exp_vals_n5; z_r8 = z_r8 + 1i) {
        z_red7 = z_red7 + z_scratch_f32[(z_slot * P.z_slot_f32 + P.z_off_exp_vals) + min(z_r8, z_exp_vals_n5 - 1i)];
    }
    let sum_exp: f32 = z_red7;
    // line 7: out = exp_vals / sum_exp
    for (var z_e9: i32 = 0i; z_e9 < P.out_d0; z_e9 = z_e9 + 1i) {
        out[z_e9] = (z_scratch_f32[(z_slot * P.z_slot_f32 + P.z_off_exp_vals) + min(z_e9, z_exp_vals_n5 - 1i)] / sum_exp);
    }
}
