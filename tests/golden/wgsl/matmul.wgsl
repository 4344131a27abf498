// matmul: @kernel matmul -- WGSL schedule `generic`, ZynML line 1

struct Params {
    A_d0: i32,
    A_d1: i32,
    B_d0: i32,
    B_d1: i32,
    K: i32,
    M: i32,
    N: i32,
    out_d0: i32,
    out_d1: i32,
    z_n_i: i32,
    z_n_j: i32,
    z_total: i32,
}

@group(0) @binding(0) var<storage, read> A: array<f32>;  // A: f32
@group(0) @binding(1) var<storage, read> B: array<f32>;  // B: f32
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(3) var<uniform> P: Params;

@compute @workgroup_size(256, 1, 1)
fn matmul(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_slot: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y) * 256i + i32(z_lid.x);
    if (z_slot >= P.z_total) { return; }
    // one invocation per iteration of the parallel loops i, j
    var z_r1: i32 = z_slot;
    let z_j_it2: i32 = z_r1 % P.z_n_j;
    z_r1 = z_r1 / P.z_n_j;
    let z_i_it3: i32 = z_r1 % P.z_n_i;
    z_r1 = z_r1 / P.z_n_i;
    // line 4: for i in 0..M, j in 0..N:
    let i: i32 = 0i + z_i_it3 * 1i;
    // line 4: for i in 0..M, j in 0..N:
    let j: i32 = 0i + z_j_it2 * 1i;
    // line 5: var sum = 0.0
    var sum: f32 = 0.0f;
    // line 6: for k in 0..K:
    for (var k: i32 = 0i; k < P.K; k = k + 1i) {
        // line 7: sum += A[i, k] * B[k, j]
        sum = (sum + (A[(i) * P.A_d1 + k] * B[(k) * P.B_d1 + j]));
    }
    // line 8: out[i, j] = sum
    out[(i) * P.out_d1 + j] = sum;
}
