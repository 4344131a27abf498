// mul_add: @kernel elementwise -- WGSL schedule `generic`, ZynML line 1

struct Params {
    len: i32,
    x_d0: i32,
    y_d0: i32,
    out_d0: i32,
    z_n_i: i32,
    z_total: i32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;  // x: f32
@group(0) @binding(1) var<storage, read> y: array<f32>;  // y: f32
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(3) var<uniform> P: Params;

@compute @workgroup_size(256, 1, 1)
fn mul_add(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_slot: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y) * 256i + i32(z_lid.x);
    if (z_slot >= P.z_total) { return; }
    // one invocation per iteration of the parallel loops i
    var z_r1: i32 = z_slot;
    let z_i_it2: i32 = z_r1 % P.z_n_i;
    z_r1 = z_r1 / P.z_n_i;
    // line 3: for i in 0..len:
    let i: i32 = 0i + z_i_it2 * 1i;
    // line 4: out[i] = x[i] * y[i] + 1.0
    out[i] = ((x[i] * y[i]) + 1.0f);
}
