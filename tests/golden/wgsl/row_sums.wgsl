// row_sums: @kernel reduce(axis=1, op=+) -- WGSL schedule `reduce`, ZynML line 1

struct Params {
    cols: i32,
    matrix_d0: i32,
    matrix_d1: i32,
    rows: i32,
    out_d0: i32,
    z_n_i: i32,
    z_n_j: i32,
}

@group(0) @binding(0) var<storage, read> matrix: array<f32>;  // matrix: f32
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(2) var<uniform> P: Params;

var<workgroup> z_red: array<f32, 256>;

@compute @workgroup_size(256, 1, 1)
fn row_sums(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    if (z_wid >= P.z_n_i) { return; }
    // one workgroup per output; its invocations share the j loop
    var z_k1: i32 = z_wid;
    let z_i_it2: i32 = z_k1 % P.z_n_i;
    z_k1 = z_k1 / P.z_n_i;
    // line 3: for i in 0..rows, j in 0..cols:
    let i: i32 = 0i + z_i_it2 * 1i;
    var z_acc: f32 = 0.0f;
    for (var z_t: i32 = i32(z_lid.x); z_t < P.z_n_j; z_t = z_t + 256i) {
        var z_r3: i32 = z_t;
        let z_j_it4: i32 = z_r3 % P.z_n_j;
        z_r3 = z_r3 / P.z_n_j;
        // line 3: for i in 0..rows, j in 0..cols:
        let j: i32 = 0i + z_j_it4 * 1i;
        // line 4: yield matrix[i, j]
        z_acc = z_acc + matrix[(i) * P.matrix_d1 + j];
    }
    z_red[z_lid.x] = z_acc;
    workgroupBarrier();
    for (var z_s: u32 = 128u; z_s > 0u; z_s = z_s >> 1u) {
        if (z_lid.x < z_s) {
            z_red[z_lid.x] = z_red[z_lid.x] + z_red[z_lid.x + z_s];
        }
        workgroupBarrier();
    }
    if (z_lid.x == 0u) {
        out[z_i_it2] = z_red[0];
    }
}
