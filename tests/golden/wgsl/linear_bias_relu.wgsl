// linear_bias_relu: @kernel matmul -- WGSL schedule `matmul`, ZynML line 1
// note: tiled matmul: 128 x 128 block tiles, 8 deep, 8 x 8 per invocation, x and w tiles in workgroup memory

struct Params {
    K: i32,
    M: i32,
    N: i32,
    bias_d0: i32,
    w_d0: i32,
    w_d1: i32,
    x_d0: i32,
    x_d1: i32,
    out_d0: i32,
    out_d1: i32,
    z_n_i: i32,
    z_n_j: i32,
    z_n_k: i32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;  // x: f32
@group(0) @binding(1) var<storage, read> w: array<f32>;  // w: f32
@group(0) @binding(2) var<storage, read> bias: array<f32>;  // bias: f32
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(4) var<uniform> P: Params;

var<workgroup> z_As: array<vec4<f32>, 256>;
var<workgroup> z_Bs: array<vec4<f32>, 256>;

fn z_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// max and min propagate NaN, as numpy's maximum and minimum do
fn z_max_f32(a: f32, b: f32) -> f32 {
    if (z_isnan_f32(a) || z_isnan_f32(b)) { return a + b; } return max(a, b); }
fn z_min_f32(a: f32, b: f32) -> f32 {
    if (z_isnan_f32(a) || z_isnan_f32(b)) { return a + b; } return min(a, b); }
fn z_store(z_i: i32, z_j: i32, z_b: i32, z_acc: f32) {
    if (z_i >= P.z_n_i || z_j >= P.z_n_j) { return; }
    // line 7: out[i, j] = max(sum + bias[j], 0.0)
    out[(z_i) * P.out_d1 + z_j] = z_max_f32((z_acc + bias[z_j]), 0.0f);
}

@compute @workgroup_size(256, 1, 1)
fn linear_bias_relu(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    let z_tm: i32 = (P.z_n_i + 127i) / 128i;
    let z_tn: i32 = (P.z_n_j + 127i) / 128i;
    if (z_wid >= 1i * z_tm * z_tn) { return; }
    // one workgroup per 128 x 128 block of out; each of its 256 invocations keeps 8 x 8 sums in registers
    let z_t: i32 = i32(z_lid.x);
    let z_bz: i32 = z_wid / (z_tm * z_tn);
    let z_row0: i32 = ((z_wid / z_tn) % z_tm) * 128i;
    let z_col0: i32 = (z_wid % z_tn) * 128i;
    let z_tx: i32 = z_t % 16i;
    let z_ty: i32 = z_t / 16i;
    var z_c0_0: vec4<f32> = vec4<f32>(0.0f);
    var z_c0_1: vec4<f32> = vec4<f32>(0.0f);
    var z_c1_0: vec4<f32> = vec4<f32>(0.0f);
    var z_c1_1: vec4<f32> = vec4<f32>(0.0f);
    var z_c2_0: vec4<f32> = vec4<f32>(0.0f);
    var z_c2_1: vec4<f32> = vec4<f32>(0.0f);
    var z_c3_0: vec4<f32> = vec4<f32>(0.0f);
    var z_c3_1: vec4<f32> = vec4<f32>(0.0f);
    var z_c4_0: vec4<f32> = vec4<f32>(0.0f);
    var z_c4_1: vec4<f32> = vec4<f32>(0.0f);
    var z_c5_0: vec4<f32> = vec4<f32>(0.0f);
    var z_c5_1: vec4<f32> = vec4<f32>(0.0f);
    var z_c6_0: vec4<f32> = vec4<f32>(0.0f);
    var z_c6_1: vec4<f32> = vec4<f32>(0.0f);
    var z_c7_0: vec4<f32> = vec4<f32>(0.0f);
    var z_c7_1: vec4<f32> = vec4<f32>(0.0f);
    var z_ra: array<f32, 4>;
    var z_rb: array<f32, 4>;
    let z_ktiles: i32 = (P.z_n_k + 7i) / 8i;
    // line 5: for k in 0..K:
    // tile 0 of x and w into workgroup memory (x transposed)
    z_ra[0] = select(0.0f, x[((z_row0 + ((z_t + 0i) / 8i))) * P.x_d1 + (0i + ((z_t + 0i) % 8i))], (z_row0 + ((z_t + 0i) / 8i)) < P.z_n_i && (0i + ((z_t + 0i) % 8i)) < P.z_n_k);
    z_ra[1] = select(0.0f, x[((z_row0 + ((z_t + 256i) / 8i))) * P.x_d1 + (0i + ((z_t + 256i) % 8i))], (z_row0 + ((z_t + 256i) / 8i)) < P.z_n_i && (0i + ((z_t + 256i) % 8i)) < P.z_n_k);
    z_ra[2] = select(0.0f, x[((z_row0 + ((z_t + 512i) / 8i))) * P.x_d1 + (0i + ((z_t + 512i) % 8i))], (z_row0 + ((z_t + 512i) / 8i)) < P.z_n_i && (0i + ((z_t + 512i) % 8i)) < P.z_n_k);
    z_ra[3] = select(0.0f, x[((z_row0 + ((z_t + 768i) / 8i))) * P.x_d1 + (0i + ((z_t + 768i) % 8i))], (z_row0 + ((z_t + 768i) / 8i)) < P.z_n_i && (0i + ((z_t + 768i) % 8i)) < P.z_n_k);
    z_rb[0] = select(0.0f, w[((z_col0 + ((z_t + 0i) / 8i))) * P.w_d1 + (0i + ((z_t + 0i) % 8i))], (z_col0 + ((z_t + 0i) / 8i)) < P.z_n_j && (0i + ((z_t + 0i) % 8i)) < P.z_n_k);
    z_rb[1] = select(0.0f, w[((z_col0 + ((z_t + 256i) / 8i))) * P.w_d1 + (0i + ((z_t + 256i) % 8i))], (z_col0 + ((z_t + 256i) / 8i)) < P.z_n_j && (0i + ((z_t + 256i) % 8i)) < P.z_n_k);
    z_rb[2] = select(0.0f, w[((z_col0 + ((z_t + 512i) / 8i))) * P.w_d1 + (0i + ((z_t + 512i) % 8i))], (z_col0 + ((z_t + 512i) / 8i)) < P.z_n_j && (0i + ((z_t + 512i) % 8i)) < P.z_n_k);
    z_rb[3] = select(0.0f, w[((z_col0 + ((z_t + 768i) / 8i))) * P.w_d1 + (0i + ((z_t + 768i) % 8i))], (z_col0 + ((z_t + 768i) / 8i)) < P.z_n_j && (0i + ((z_t + 768i) % 8i)) < P.z_n_k);
    z_As[(((z_t + 0i) % 8i) * 128i + ((z_t + 0i) / 8i)) / 4i][(((z_t + 0i) % 8i) * 128i + ((z_t + 0i) / 8i)) % 4i] = z_ra[0];
    z_As[(((z_t + 256i) % 8i) * 128i + ((z_t + 256i) / 8i)) / 4i][(((z_t + 256i) % 8i) * 128i + ((z_t + 256i) / 8i)) % 4i] = z_ra[1];
    z_As[(((z_t + 512i) % 8i) * 128i + ((z_t + 512i) / 8i)) / 4i][(((z_t + 512i) % 8i) * 128i + ((z_t + 512i) / 8i)) % 4i] = z_ra[2];
    z_As[(((z_t + 768i) % 8i) * 128i + ((z_t + 768i) / 8i)) / 4i][(((z_t + 768i) % 8i) * 128i + ((z_t + 768i) / 8i)) % 4i] = z_ra[3];
    z_Bs[(((z_t + 0i) % 8i) * 128i + ((z_t + 0i) / 8i)) / 4i][(((z_t + 0i) % 8i) * 128i + ((z_t + 0i) / 8i)) % 4i] = z_rb[0];
    z_Bs[(((z_t + 256i) % 8i) * 128i + ((z_t + 256i) / 8i)) / 4i][(((z_t + 256i) % 8i) * 128i + ((z_t + 256i) / 8i)) % 4i] = z_rb[1];
    z_Bs[(((z_t + 512i) % 8i) * 128i + ((z_t + 512i) / 8i)) / 4i][(((z_t + 512i) % 8i) * 128i + ((z_t + 512i) / 8i)) % 4i] = z_rb[2];
    z_Bs[(((z_t + 768i) % 8i) * 128i + ((z_t + 768i) / 8i)) / 4i][(((z_t + 768i) % 8i) * 128i + ((z_t + 768i) / 8i)) % 4i] = z_rb[3];
    workgroupBarrier();
    for (var z_kt: i32 = 0i; z_kt < z_ktiles; z_kt = z_kt + 1i) {
        let z_k1: i32 = (z_kt + 1i) * 8i;
        let z_more: bool = z_kt + 1i < z_ktiles;
        if (z_more) {
            // the next tile into registers while this one is used
            z_ra[0] = select(0.0f, x[((z_row0 + ((z_t + 0i) / 8i))) * P.x_d1 + (z_k1 + ((z_t + 0i) % 8i))], (z_row0 + ((z_t + 0i) / 8i)) < P.z_n_i && (z_k1 + ((z_t + 0i) % 8i)) < P.z_n_k);
            z_ra[1] = select(0.0f, x[((z_row0 + ((z_t + 256i) / 8i))) * P.x_d1 + (z_k1 + ((z_t + 256i) % 8i))], (z_row0 + ((z_t + 256i) / 8i)) < P.z_n_i && (z_k1 + ((z_t + 256i) % 8i)) < P.z_n_k);
            z_ra[2] = select(0.0f, x[((z_row0 + ((z_t + 512i) / 8i))) * P.x_d1 + (z_k1 + ((z_t + 512i) % 8i))], (z_row0 + ((z_t + 512i) / 8i)) < P.z_n_i && (z_k1 + ((z_t + 512i) % 8i)) < P.z_n_k);
            z_ra[3] = select(0.0f, x[((z_row0 + ((z_t + 768i) / 8i))) * P.x_d1 + (z_k1 + ((z_t + 768i) % 8i))], (z_row0 + ((z_t + 768i) / 8i)) < P.z_n_i && (z_k1 + ((z_t + 768i) % 8i)) < P.z_n_k);
            z_rb[0] = select(0.0f, w[((z_col0 + ((z_t + 0i) / 8i))) * P.w_d1 + (z_k1 + ((z_t + 0i) % 8i))], (z_col0 + ((z_t + 0i) / 8i)) < P.z_n_j && (z_k1 + ((z_t + 0i) % 8i)) < P.z_n_k);
            z_rb[1] = select(0.0f, w[((z_col0 + ((z_t + 256i) / 8i))) * P.w_d1 + (z_k1 + ((z_t + 256i) % 8i))], (z_col0 + ((z_t + 256i) / 8i)) < P.z_n_j && (z_k1 + ((z_t + 256i) % 8i)) < P.z_n_k);
            z_rb[2] = select(0.0f, w[((z_col0 + ((z_t + 512i) / 8i))) * P.w_d1 + (z_k1 + ((z_t + 512i) % 8i))], (z_col0 + ((z_t + 512i) / 8i)) < P.z_n_j && (z_k1 + ((z_t + 512i) % 8i)) < P.z_n_k);
            z_rb[3] = select(0.0f, w[((z_col0 + ((z_t + 768i) / 8i))) * P.w_d1 + (z_k1 + ((z_t + 768i) % 8i))], (z_col0 + ((z_t + 768i) / 8i)) < P.z_n_j && (z_k1 + ((z_t + 768i) % 8i)) < P.z_n_k);
        }
        for (var z_kk: i32 = 0i; z_kk < 8i; z_kk = z_kk + 1i) {
            let z_a0: vec4<f32> = z_As[z_kk * 32i + 0i + z_ty];
            let z_a1: vec4<f32> = z_As[z_kk * 32i + 16i + z_ty];
            let z_b0: vec4<f32> = z_Bs[z_kk * 32i + 0i + z_tx];
            let z_b1: vec4<f32> = z_Bs[z_kk * 32i + 16i + z_tx];
            z_c0_0 = fma(vec4<f32>(z_a0[0]), z_b0, z_c0_0);
            z_c0_1 = fma(vec4<f32>(z_a0[0]), z_b1, z_c0_1);
            z_c1_0 = fma(vec4<f32>(z_a0[1]), z_b0, z_c1_0);
            z_c1_1 = fma(vec4<f32>(z_a0[1]), z_b1, z_c1_1);
            z_c2_0 = fma(vec4<f32>(z_a0[2]), z_b0, z_c2_0);
            z_c2_1 = fma(vec4<f32>(z_a0[2]), z_b1, z_c2_1);
            z_c3_0 = fma(vec4<f32>(z_a0[3]), z_b0, z_c3_0);
            z_c3_1 = fma(vec4<f32>(z_a0[3]), z_b1, z_c3_1);
            z_c4_0 = fma(vec4<f32>(z_a1[0]), z_b0, z_c4_0);
            z_c4_1 = fma(vec4<f32>(z_a1[0]), z_b1, z_c4_1);
            z_c5_0 = fma(vec4<f32>(z_a1[1]), z_b0, z_c5_0);
            z_c5_1 = fma(vec4<f32>(z_a1[1]), z_b1, z_c5_1);
            z_c6_0 = fma(vec4<f32>(z_a1[2]), z_b0, z_c6_0);
            z_c6_1 = fma(vec4<f32>(z_a1[2]), z_b1, z_c6_1);
            z_c7_0 = fma(vec4<f32>(z_a1[3]), z_b0, z_c7_0);
            z_c7_1 = fma(vec4<f32>(z_a1[3]), z_b1, z_c7_1);
        }
        workgroupBarrier();
        if (z_more) {
            z_As[(((z_t + 0i) % 8i) * 128i + ((z_t + 0i) / 8i)) / 4i][(((z_t + 0i) % 8i) * 128i + ((z_t + 0i) / 8i)) % 4i] = z_ra[0];
            z_As[(((z_t + 256i) % 8i) * 128i + ((z_t + 256i) / 8i)) / 4i][(((z_t + 256i) % 8i) * 128i + ((z_t + 256i) / 8i)) % 4i] = z_ra[1];
            z_As[(((z_t + 512i) % 8i) * 128i + ((z_t + 512i) / 8i)) / 4i][(((z_t + 512i) % 8i) * 128i + ((z_t + 512i) / 8i)) % 4i] = z_ra[2];
            z_As[(((z_t + 768i) % 8i) * 128i + ((z_t + 768i) / 8i)) / 4i][(((z_t + 768i) % 8i) * 128i + ((z_t + 768i) / 8i)) % 4i] = z_ra[3];
            z_Bs[(((z_t + 0i) % 8i) * 128i + ((z_t + 0i) / 8i)) / 4i][(((z_t + 0i) % 8i) * 128i + ((z_t + 0i) / 8i)) % 4i] = z_rb[0];
            z_Bs[(((z_t + 256i) % 8i) * 128i + ((z_t + 256i) / 8i)) / 4i][(((z_t + 256i) % 8i) * 128i + ((z_t + 256i) / 8i)) % 4i] = z_rb[1];
            z_Bs[(((z_t + 512i) % 8i) * 128i + ((z_t + 512i) / 8i)) / 4i][(((z_t + 512i) % 8i) * 128i + ((z_t + 512i) / 8i)) % 4i] = z_rb[2];
            z_Bs[(((z_t + 768i) % 8i) * 128i + ((z_t + 768i) / 8i)) / 4i][(((z_t + 768i) % 8i) * 128i + ((z_t + 768i) / 8i)) % 4i] = z_rb[3];
        }
        workgroupBarrier();
    }
    z_store(z_row0 + 0i + z_ty * 4i + 0i, z_col0 + 0i + z_tx * 4i + 0i, z_bz, z_c0_0[0]);
    z_store(z_row0 + 0i + z_ty * 4i + 0i, z_col0 + 0i + z_tx * 4i + 1i, z_bz, z_c0_0[1]);
    z_store(z_row0 + 0i + z_ty * 4i + 0i, z_col0 + 0i + z_tx * 4i + 2i, z_bz, z_c0_0[2]);
    z_store(z_row0 + 0i + z_ty * 4i + 0i, z_col0 + 0i + z_tx * 4i + 3i, z_bz, z_c0_0[3]);
    z_store(z_row0 + 0i + z_ty * 4i + 0i, z_col0 + 64i + z_tx * 4i + 0i, z_bz, z_c0_1[0]);
    z_store(z_row0 + 0i + z_ty * 4i + 0i, z_col0 + 64i + z_tx * 4i + 1i, z_bz, z_c0_1[1]);
    z_store(z_row0 + 0i + z_ty * 4i + 0i, z_col0 + 64i + z_tx * 4i + 2i, z_bz, z_c0_1[2]);
    z_store(z_row0 + 0i + z_ty * 4i + 0i, z_col0 + 64i + z_tx * 4i + 3i, z_bz, z_c0_1[3]);
    z_store(z_row0 + 0i + z_ty * 4i + 1i, z_col0 + 0i + z_tx * 4i + 0i, z_bz, z_c1_0[0]);
    z_store(z_row0 + 0i + z_ty * 4i + 1i, z_col0 + 0i + z_tx * 4i + 1i, z_bz, z_c1_0[1]);
    z_store(z_row0 + 0i + z_ty * 4i + 1i, z_col0 + 0i + z_tx * 4i + 2i, z_bz, z_c1_0[2]);
    z_store(z_row0 + 0i + z_ty * 4i + 1i, z_col0 + 0i + z_tx * 4i + 3i, z_bz, z_c1_0[3]);
    z_store(z_row0 + 0i + z_ty * 4i + 1i, z_col0 + 64i + z_tx * 4i + 0i, z_bz, z_c1_1[0]);
    z_store(z_row0 + 0i + z_ty * 4i + 1i, z_col0 + 64i + z_tx * 4i + 1i, z_bz, z_c1_1[1]);
    z_store(z_row0 + 0i + z_ty * 4i + 1i, z_col0 + 64i + z_tx * 4i + 2i, z_bz, z_c1_1[2]);
    z_store(z_row0 + 0i + z_ty * 4i + 1i, z_col0 + 64i + z_tx * 4i + 3i, z_bz, z_c1_1[3]);
    z_store(z_row0 + 0i + z_ty * 4i + 2i, z_col0 + 0i + z_tx * 4i + 0i, z_bz, z_c2_0[0]);
    z_store(z_row0 + 0i + z_ty * 4i + 2i, z_col0 + 0i + z_tx * 4i + 1i, z_bz, z_c2_0[1]);
    z_store(z_row0 + 0i + z_ty * 4i + 2i, z_col0 + 0i + z_tx * 4i + 2i, z_bz, z_c2_0[2]);
    z_store(z_row0 + 0i + z_ty * 4i + 2i, z_col0 + 0i + z_tx * 4i + 3i, z_bz, z_c2_0[3]);
    z_store(z_row0 + 0i + z_ty * 4i + 2i, z_col0 + 64i + z_tx * 4i + 0i, z_bz, z_c2_1[0]);
    z_store(z_row0 + 0i + z_ty * 4i + 2i, z_col0 + 64i + z_tx * 4i + 1i, z_bz, z_c2_1[1]);
    z_store(z_row0 + 0i + z_ty * 4i + 2i, z_col0 + 64i + z_tx * 4i + 2i, z_bz, z_c2_1[2]);
    z_store(z_row0 + 0i + z_ty * 4i + 2i, z_col0 + 64i + z_tx * 4i + 3i, z_bz, z_c2_1[3]);
    z_store(z_row0 + 0i + z_ty * 4i + 3i, z_col0 + 0i + z_tx * 4i + 0i, z_bz, z_c3_0[0]);
    z_store(z_row0 + 0i + z_ty * 4i + 3i, z_col0 + 0i + z_tx * 4i + 1i, z_bz, z_c3_0[1]);
    z_store(z_row0 + 0i + z_ty * 4i + 3i, z_col0 + 0i + z_tx * 4i + 2i, z_bz, z_c3_0[2]);
    z_store(z_row0 + 0i + z_ty * 4i + 3i, z_col0 + 0i + z_tx * 4i + 3i, z_bz, z_c3_0[3]);
    z_store(z_row0 + 0i + z_ty * 4i + 3i, z_col0 + 64i + z_tx * 4i + 0i, z_bz, z_c3_1[0]);
    z_store(z_row0 + 0i + z_ty * 4i + 3i, z_col0 + 64i + z_tx * 4i + 1i, z_bz, z_c3_1[1]);
    z_store(z_row0 + 0i + z_ty * 4i + 3i, z_col0 + 64i + z_tx * 4i + 2i, z_bz, z_c3_1[2]);
    z_store(z_row0 + 0i + z_ty * 4i + 3i, z_col0 + 64i + z_tx * 4i + 3i, z_bz, z_c3_1[3]);
    z_store(z_row0 + 64i + z_ty * 4i + 0i, z_col0 + 0i + z_tx * 4i + 0i, z_bz, z_c4_0[0]);
    z_store(z_row0 + 64i + z_ty * 4i + 0i, z_col0 + 0i + z_tx * 4i + 1i, z_bz, z_c4_0[1]);
    z_store(z_row0 + 64i + z_ty * 4i + 0i, z_col0 + 0i + z_tx * 4i + 2i, z_bz, z_c4_0[2]);
    z_store(z_row0 + 64i + z_ty * 4i + 0i, z_col0 + 0i + z_tx * 4i + 3i, z_bz, z_c4_0[3]);
    z_store(z_row0 + 64i + z_ty * 4i + 0i, z_col0 + 64i + z_tx * 4i + 0i, z_bz, z_c4_1[0]);
    z_store(z_row0 + 64i + z_ty * 4i + 0i, z_col0 + 64i + z_tx * 4i + 1i, z_bz, z_c4_1[1]);
    z_store(z_row0 + 64i + z_ty * 4i + 0i, z_col0 + 64i + z_tx * 4i + 2i, z_bz, z_c4_1[2]);
    z_store(z_row0 + 64i + z_ty * 4i + 0i, z_col0 + 64i + z_tx * 4i + 3i, z_bz, z_c4_1[3]);
    z_store(z_row0 + 64i + z_ty * 4i + 1i, z_col0 + 0i + z_tx * 4i + 0i, z_bz, z_c5_0[0]);
    z_store(z_row0 + 64i + z_ty * 4i + 1i, z_col0 + 0i + z_tx * 4i + 1i, z_bz, z_c5_0[1]);
    z_store(z_row0 + 64i + z_ty * 4i + 1i, z_col0 + 0i + z_tx * 4i + 2i, z_bz, z_c5_0[2]);
    z_store(z_row0 + 64i + z_ty * 4i + 1i, z_col0 + 0i + z_tx * 4i + 3i, z_bz, z_c5_0[3]);
    z_store(z_row0 + 64i + z_ty * 4i + 1i, z_col0 + 64i + z_tx * 4i + 0i, z_bz, z_c5_1[0]);
    z_store(z_row0 + 64i + z_ty * 4i + 1i, z_col0 + 64i + z_tx * 4i + 1i, z_bz, z_c5_1[1]);
    z_store(z_row0 + 64i + z_ty * 4i + 1i, z_col0 + 64i + z_tx * 4i + 2i, z_bz, z_c5_1[2]);
    z_store(z_row0 + 64i + z_ty * 4i + 1i, z_col0 + 64i + z_tx * 4i + 3i, z_bz, z_c5_1[3]);
    z_store(z_row0 + 64i + z_ty * 4i + 2i, z_col0 + 0i + z_tx * 4i + 0i, z_bz, z_c6_0[0]);
    z_store(z_row0 + 64i + z_ty * 4i + 2i, z_col0 + 0i + z_tx * 4i + 1i, z_bz, z_c6_0[1]);
    z_store(z_row0 + 64i + z_ty * 4i + 2i, z_col0 + 0i + z_tx * 4i + 2i, z_bz, z_c6_0[2]);
    z_store(z_row0 + 64i + z_ty * 4i + 2i, z_col0 + 0i + z_tx * 4i + 3i, z_bz, z_c6_0[3]);
    z_store(z_row0 + 64i + z_ty * 4i + 2i, z_col0 + 64i + z_tx * 4i + 0i, z_bz, z_c6_1[0]);
    z_store(z_row0 + 64i + z_ty * 4i + 2i, z_col0 + 64i + z_tx * 4i + 1i, z_bz, z_c6_1[1]);
    z_store(z_row0 + 64i + z_ty * 4i + 2i, z_col0 + 64i + z_tx * 4i + 2i, z_bz, z_c6_1[2]);
    z_store(z_row0 + 64i + z_ty * 4i + 2i, z_col0 + 64i + z_tx * 4i + 3i, z_bz, z_c6_1[3]);
    z_store(z_row0 + 64i + z_ty * 4i + 3i, z_col0 + 0i + z_tx * 4i + 0i, z_bz, z_c7_0[0]);
    z_store(z_row0 + 64i + z_ty * 4i + 3i, z_col0 + 0i + z_tx * 4i + 1i, z_bz, z_c7_0[1]);
    z_store(z_row0 + 64i + z_ty * 4i + 3i, z_col0 + 0i + z_tx * 4i + 2i, z_bz, z_c7_0[2]);
    z_store(z_row0 + 64i + z_ty * 4i + 3i, z_col0 + 0i + z_tx * 4i + 3i, z_bz, z_c7_0[3]);
    z_store(z_row0 + 64i + z_ty * 4i + 3i, z_col0 + 64i + z_tx * 4i + 0i, z_bz, z_c7_1[0]);
    z_store(z_row0 + 64i + z_ty * 4i + 3i, z_col0 + 64i + z_tx * 4i + 1i, z_bz, z_c7_1[1]);
    z_store(z_row0 + 64i + z_ty * 4i + 3i, z_col0 + 64i + z_tx * 4i + 2i, z_bz, z_c7_1[2]);
    z_store(z_row0 + 64i + z_ty * 4i + 3i, z_col0 + 64i + z_tx * 4i + 3i, z_bz, z_c7_1[3]);
}
