// argmax: @kernel reduce(op=argmax) -- WGSL schedule `reduce`, ZynML line 1

struct Params {
    data_d0: i32,
    len: i32,
    z_n_i: i32,
    z_groups: i32,
}

@group(0) @binding(0) var<storage, read> data: array<f32>;  // data: f32
@group(0) @binding(1) var<storage, read_write> out: array<i32>;  // out: i64
@group(0) @binding(2) var<storage, read_write> z_part: array<f32>;
@group(0) @binding(3) var<storage, read_write> z_part_i: array<i32>;
@group(0) @binding(4) var<uniform> P: Params;

var<workgroup> z_red: array<f32, 256>;
var<workgroup> z_red_i: array<i32, 256>;

fn z_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// max and min propagate NaN, as numpy's maximum and minimum do
fn z_max_f32(a: f32, b: f32) -> f32 {
    if (z_isnan_f32(a) || z_isnan_f32(b)) { return a + b; } return max(a, b); }
fn z_min_f32(a: f32, b: f32) -> f32 {
    if (z_isnan_f32(a) || z_isnan_f32(b)) { return a + b; } return min(a, b); }

@compute @workgroup_size(256, 1, 1)
fn argmax_partials(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    // pass 1 of 2: workgroup z_wid combines every P.z_groups-th block of 256
    var z_acc: f32 = bitcast<f32>(0xff800000u);
    var z_acc_i: i32 = i32(2147483647);
    for (var z_t: i32 = z_wid * 256i + i32(z_lid.x); z_t < P.z_n_i; z_t = z_t + P.z_groups * 256i) {
        var z_r1: i32 = z_t;
        let z_i_it2: i32 = z_r1 % P.z_n_i;
        z_r1 = z_r1 / P.z_n_i;
        // line 3: for i in 0..len:
        let i: i32 = 0i + z_i_it2 * 1i;
        // line 4: yield (data[i], i)
        let z_y3: f32 = data[i];
        let z_yi4: i32 = i;
        if ((z_isnan_f32(z_y3) && !z_isnan_f32(z_acc)) || (!z_isnan_f32(z_y3) && !z_isnan_f32(z_acc) && z_y3 > z_acc) || ((z_y3 == z_acc || (z_isnan_f32(z_y3) && z_isnan_f32(z_acc))) && z_yi4 < z_acc_i)) {
            z_acc = z_y3;
            z_acc_i = z_yi4;
        }
    }
    z_red[z_lid.x] = z_acc;
    z_red_i[z_lid.x] = z_acc_i;
    workgroupBarrier();
    for (var z_s: u32 = 128u; z_s > 0u; z_s = z_s >> 1u) {
        if (z_lid.x < z_s) {
            if ((z_isnan_f32(z_red[z_lid.x + z_s]) && !z_isnan_f32(z_red[z_lid.x])) || (!z_isnan_f32(z_red[z_lid.x + z_s]) && !z_isnan_f32(z_red[z_lid.x]) && z_red[z_lid.x + z_s] > z_red[z_lid.x]) || ((z_red[z_lid.x + z_s] == z_red[z_lid.x] || (z_isnan_f32(z_red[z_lid.x + z_s]) && z_isnan_f32(z_red[z_lid.x]))) && z_red_i[z_lid.x + z_s] < z_red_i[z_lid.x])) {
                z_red[z_lid.x] = z_red[z_lid.x + z_s];
                z_red_i[z_lid.x] = z_red_i[z_lid.x + z_s];
            }
        }
        workgroupBarrier();
    }
    if (z_lid.x == 0u) {
        z_part[z_wid] = z_red[0];
        z_part_i[z_wid] = z_red_i[0];
    }
}

@compute @workgroup_size(256, 1, 1)
fn argmax_final(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    // pass 2 of 2: one workgroup combines the partials
    var z_acc: f32 = bitcast<f32>(0xff800000u);
    var z_acc_i: i32 = i32(2147483647);
    for (var z_t: i32 = i32(z_lid.x); z_t < P.z_groups; z_t = z_t + 256i) {
        if ((z_isnan_f32(z_part[z_t]) && !z_isnan_f32(z_acc)) || (!z_isnan_f32(z_part[z_t]) && !z_isnan_f32(z_acc) && z_part[z_t] > z_acc) || ((z_part[z_t] == z_acc || (z_isnan_f32(z_part[z_t]) && z_isnan_f32(z_acc))) && z_part_i[z_t] < z_acc_i)) {
            z_acc = z_part[z_t];
            z_acc_i = z_part_i[z_t];
        }
    }
    z_red[z_lid.x] = z_acc;
    z_red_i[z_lid.x] = z_acc_i;
    workgroupBarrier();
    for (var z_s: u32 = 128u; z_s > 0u; z_s = z_s >> 1u) {
        if (z_lid.x < z_s) {
            if ((z_isnan_f32(z_red[z_lid.x + z_s]) && !z_isnan_f32(z_red[z_lid.x])) || (!z_isnan_f32(z_red[z_lid.x + z_s]) && !z_isnan_f32(z_red[z_lid.x]) && z_red[z_lid.x + z_s] > z_red[z_lid.x]) || ((z_red[z_lid.x + z_s] == z_red[z_lid.x] || (z_isnan_f32(z_red[z_lid.x + z_s]) && z_isnan_f32(z_red[z_lid.x]))) && z_red_i[z_lid.x + z_s] < z_red_i[z_lid.x])) {
                z_red[z_lid.x] = z_red[z_lid.x + z_s];
                z_red_i[z_lid.x] = z_red_i[z_lid.x + z_s];
            }
        }
        workgroupBarrier();
    }
    if (z_lid.x == 0u) {
        out[0] = select(z_red_i[0], -1i, z_red_i[0] == i32(2147483647));
    }
}
