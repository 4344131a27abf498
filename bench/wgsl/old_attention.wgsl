// kernel: @kernel attention -- WGSL schedule `flash`, ZynML line 1
// note: the body was recognised as attention (max, sum, weighted sum) with a key condition; one workgroup per (b, h, block of queries), K/V tiles in workgroup memory, online softmax

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
    z_n_keys: i32,
}

@group(0) @binding(0) var<storage, read> Q: array<f32>;  // Q: f32
@group(0) @binding(1) var<storage, read> K: array<f32>;  // K: f32
@group(0) @binding(2) var<storage, read> V: array<f32>;  // V: f32
@group(0) @binding(3) var<storage, read> mask: array<u32>;  // mask: bool
@group(0) @binding(4) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(5) var<storage, read_write> z_err: array<atomic<i32>>;
@group(0) @binding(6) var<uniform> P: Params;

var<workgroup> z_kv32: array<vec4<f32>, 576>;
var<workgroup> z_ml32: array<f32, 256>;
var<workgroup> z_kv64: array<vec4<f32>, 544>;
var<workgroup> z_ml64: array<f32, 256>;
var<workgroup> z_kv128: array<vec4<f32>, 528>;
var<workgroup> z_ml128: array<f32, 128>;

// integer division and remainder truncate, whatever the backend does with signs
fn z_tdiv_i32(a: i32, b: i32) -> i32 {
    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));
    return select(q, -q, (a < 0i) != (b < 0i)); }
fn z_trem_i32(a: i32, b: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(abs(a)) % bitcast<u32>(abs(b)));
    return select(r, -r, a < 0i); }
// the error flag (zynbook/compiler/errflag.py): the first failing site and its value
fn z_fail(site: i32, v: i32) {
    loop {
        let r = atomicCompareExchangeWeak(&z_err[0], 0i, site);
        if (r.exchanged) { atomicStore(&z_err[1], v); break; }
        if (r.old_value != 0i) { break; }
    }
}
fn z_chk(i: i32, n: i32, site: i32) -> i32 {
    if (i < 0i || i >= n) { z_fail(site, i); return 0i; } return i; }
fn z_in(i: i32, n: i32, site: i32) -> bool {
    if (i < 0i || i >= n) { z_fail(site, i); return false; } return true; }
fn z_idiv_i32(a: i32, b: i32, s0: i32, sov: i32) -> i32 {
    if (b == 0i) { z_fail(s0, a); return 0i; }
    if (b == -1i && a == i32(-2147483647 - 1)) { z_fail(sov, a); return 0i; }
    return z_tdiv_i32(a, b); }
fn z_irem_i32(a: i32, b: i32, s0: i32) -> i32 {
    if (b == 0i) { z_fail(s0, a); return 0i; } if (b == -1i) { return 0i; }
    return z_trem_i32(a, b); }
fn z_idiv_u32(a: u32, b: u32, s0: i32, sov: i32) -> u32 {
    if (b == 0u) { z_fail(s0, bitcast<i32>(a)); return 0u; } return a / b; }
fn z_irem_u32(a: u32, b: u32, s0: i32) -> u32 {
    if (b == 0u) { z_fail(s0, bitcast<i32>(a)); return 0u; } return a % b; }

// head_dim up to 32: 32 queries per workgroup, 4 invocations per query, key tiles of 32
@compute @workgroup_size(128, 1, 1)
fn kernel_d32(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    let z_scale: f32 = (1.0f / sqrt(f32(P.head_dim)));
    let z_qblocks: i32 = (P.z_n_i + 31i) / 32i;
    if (z_wid >= P.z_n_b * P.z_n_h * z_qblocks) { return; }
    let z_t: i32 = i32(z_lid.x);
    let z_q: i32 = z_t / 4i;
    let z_r: i32 = z_t % 4i;
    let z_bh: i32 = z_wid / z_qblocks;
    let z_b: i32 = z_bh / P.z_n_h;
    let z_h: i32 = z_bh % P.z_n_h;
    let z_i: i32 = (z_wid % z_qblocks) * 32i + z_q;
    let z_qok: bool = z_i < P.z_n_i;
    let z_S: i32 = P.z_n_keys;
    let z_DQ: i32 = P.Q_d3;
    let z_DV: i32 = P.out_d3;
    let z_qbase: i32 = z_b * P.Q_d1 * P.Q_d2 + z_h * P.Q_d2 + min(z_i, P.Q_d2 - 1i);
    let z_kbase: i32 = z_b * P.K_d1 * P.K_d2 + z_h * P.K_d2;
    let z_vbase: i32 = z_b * P.V_d1 * P.V_d2 + z_h * P.V_d2;
    // this query's row in registers (zero past head_dim)
    let z_q0: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 0i], 0i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 1i], 1i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 2i], 2i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 3i], 3i < z_DQ));
    let z_q1: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 4i], 4i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 5i], 5i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 6i], 6i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 7i], 7i < z_DQ));
    let z_q2: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 8i], 8i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 9i], 9i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 10i], 10i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 11i], 11i < z_DQ));
    let z_q3: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 12i], 12i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 13i], 13i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 14i], 14i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 15i], 15i < z_DQ));
    let z_q4: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 16i], 16i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 17i], 17i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 18i], 18i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 19i], 19i < z_DQ));
    let z_q5: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 20i], 20i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 21i], 21i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 22i], 22i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 23i], 23i < z_DQ));
    let z_q6: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 24i], 24i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 25i], 25i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 26i], 26i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 27i], 27i < z_DQ));
    let z_q7: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 28i], 28i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 29i], 29i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 30i], 30i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 31i], 31i < z_DQ));
    var z_m: f32 = bitcast<f32>(0xff800000u);
    var z_l: f32 = 0.0f;
    var z_o0: vec4<f32> = vec4<f32>(0.0f);
    var z_o1: vec4<f32> = vec4<f32>(0.0f);
    var z_o2: vec4<f32> = vec4<f32>(0.0f);
    var z_o3: vec4<f32> = vec4<f32>(0.0f);
    var z_o4: vec4<f32> = vec4<f32>(0.0f);
    var z_o5: vec4<f32> = vec4<f32>(0.0f);
    var z_o6: vec4<f32> = vec4<f32>(0.0f);
    var z_o7: vec4<f32> = vec4<f32>(0.0f);
    for (var z_k0: i32 = 0i; z_k0 < z_S; z_k0 = z_k0 + 32i) {
        // K and V rows z_k0 .. z_k0 + 32 into workgroup memory
        for (var z_e: i32 = z_t; z_e < 256i; z_e = z_e + 128i) {
            let z_row: i32 = z_e / 8i;
            let z_c: i32 = z_e % 8i;
            let z_j: i32 = min(z_k0 + z_row, z_S - 1i);
            var z_kv4: vec4<f32> = vec4<f32>(0.0f);
            var z_vv4: vec4<f32> = vec4<f32>(0.0f);
            for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
                let z_d: i32 = z_c * 4i + z_x;
                z_kv4[z_x] = select(0.0f, K[(z_kbase + z_j) * P.K_d3 + min(z_d, P.K_d3 - 1i)], z_d < z_DQ);
                z_vv4[z_x] = select(0.0f, V[(z_vbase + z_j) * P.V_d3 + min(z_d, P.V_d3 - 1i)], z_d < z_DV);
            }
            z_kv32[z_row * 9i + z_c] = z_kv4;
            z_kv32[288i + z_row * 9i + z_c] = z_vv4;
        }
        workgroupBarrier();
        // scores of keys z_k0 + z_r + 4 * u
        var z_tmax: f32 = bitcast<f32>(0xff800000u);
        let z_jj0: i32 = z_r + 0i;
        let z_j0: i32 = z_k0 + z_jj0;
        let z_dot0: f32 = dot(z_q0, z_kv32[z_jj0 * 9i + 0i]) + dot(z_q1, z_kv32[z_jj0 * 9i + 1i]) + dot(z_q2, z_kv32[z_jj0 * 9i + 2i]) + dot(z_q3, z_kv32[z_jj0 * 9i + 3i]) + dot(z_q4, z_kv32[z_jj0 * 9i + 4i]) + dot(z_q5, z_kv32[z_jj0 * 9i + 5i]) + dot(z_q6, z_kv32[z_jj0 * 9i + 6i]) + dot(z_q7, z_kv32[z_jj0 * 9i + 7i]);
        let z_s0: f32 = select(bitcast<f32>(0xff800000u), (z_dot0 * z_scale), z_qok && z_j0 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j0, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s0);
        let z_jj1: i32 = z_r + 4i;
        let z_j1: i32 = z_k0 + z_jj1;
        let z_dot1: f32 = dot(z_q0, z_kv32[z_jj1 * 9i + 0i]) + dot(z_q1, z_kv32[z_jj1 * 9i + 1i]) + dot(z_q2, z_kv32[z_jj1 * 9i + 2i]) + dot(z_q3, z_kv32[z_jj1 * 9i + 3i]) + dot(z_q4, z_kv32[z_jj1 * 9i + 4i]) + dot(z_q5, z_kv32[z_jj1 * 9i + 5i]) + dot(z_q6, z_kv32[z_jj1 * 9i + 6i]) + dot(z_q7, z_kv32[z_jj1 * 9i + 7i]);
        let z_s1: f32 = select(bitcast<f32>(0xff800000u), (z_dot1 * z_scale), z_qok && z_j1 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j1, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s1);
        let z_jj2: i32 = z_r + 8i;
        let z_j2: i32 = z_k0 + z_jj2;
        let z_dot2: f32 = dot(z_q0, z_kv32[z_jj2 * 9i + 0i]) + dot(z_q1, z_kv32[z_jj2 * 9i + 1i]) + dot(z_q2, z_kv32[z_jj2 * 9i + 2i]) + dot(z_q3, z_kv32[z_jj2 * 9i + 3i]) + dot(z_q4, z_kv32[z_jj2 * 9i + 4i]) + dot(z_q5, z_kv32[z_jj2 * 9i + 5i]) + dot(z_q6, z_kv32[z_jj2 * 9i + 6i]) + dot(z_q7, z_kv32[z_jj2 * 9i + 7i]);
        let z_s2: f32 = select(bitcast<f32>(0xff800000u), (z_dot2 * z_scale), z_qok && z_j2 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j2, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s2);
        let z_jj3: i32 = z_r + 12i;
        let z_j3: i32 = z_k0 + z_jj3;
        let z_dot3: f32 = dot(z_q0, z_kv32[z_jj3 * 9i + 0i]) + dot(z_q1, z_kv32[z_jj3 * 9i + 1i]) + dot(z_q2, z_kv32[z_jj3 * 9i + 2i]) + dot(z_q3, z_kv32[z_jj3 * 9i + 3i]) + dot(z_q4, z_kv32[z_jj3 * 9i + 4i]) + dot(z_q5, z_kv32[z_jj3 * 9i + 5i]) + dot(z_q6, z_kv32[z_jj3 * 9i + 6i]) + dot(z_q7, z_kv32[z_jj3 * 9i + 7i]);
        let z_s3: f32 = select(bitcast<f32>(0xff800000u), (z_dot3 * z_scale), z_qok && z_j3 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j3, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s3);
        let z_jj4: i32 = z_r + 16i;
        let z_j4: i32 = z_k0 + z_jj4;
        let z_dot4: f32 = dot(z_q0, z_kv32[z_jj4 * 9i + 0i]) + dot(z_q1, z_kv32[z_jj4 * 9i + 1i]) + dot(z_q2, z_kv32[z_jj4 * 9i + 2i]) + dot(z_q3, z_kv32[z_jj4 * 9i + 3i]) + dot(z_q4, z_kv32[z_jj4 * 9i + 4i]) + dot(z_q5, z_kv32[z_jj4 * 9i + 5i]) + dot(z_q6, z_kv32[z_jj4 * 9i + 6i]) + dot(z_q7, z_kv32[z_jj4 * 9i + 7i]);
        let z_s4: f32 = select(bitcast<f32>(0xff800000u), (z_dot4 * z_scale), z_qok && z_j4 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j4, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s4);
        let z_jj5: i32 = z_r + 20i;
        let z_j5: i32 = z_k0 + z_jj5;
        let z_dot5: f32 = dot(z_q0, z_kv32[z_jj5 * 9i + 0i]) + dot(z_q1, z_kv32[z_jj5 * 9i + 1i]) + dot(z_q2, z_kv32[z_jj5 * 9i + 2i]) + dot(z_q3, z_kv32[z_jj5 * 9i + 3i]) + dot(z_q4, z_kv32[z_jj5 * 9i + 4i]) + dot(z_q5, z_kv32[z_jj5 * 9i + 5i]) + dot(z_q6, z_kv32[z_jj5 * 9i + 6i]) + dot(z_q7, z_kv32[z_jj5 * 9i + 7i]);
        let z_s5: f32 = select(bitcast<f32>(0xff800000u), (z_dot5 * z_scale), z_qok && z_j5 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j5, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s5);
        let z_jj6: i32 = z_r + 24i;
        let z_j6: i32 = z_k0 + z_jj6;
        let z_dot6: f32 = dot(z_q0, z_kv32[z_jj6 * 9i + 0i]) + dot(z_q1, z_kv32[z_jj6 * 9i + 1i]) + dot(z_q2, z_kv32[z_jj6 * 9i + 2i]) + dot(z_q3, z_kv32[z_jj6 * 9i + 3i]) + dot(z_q4, z_kv32[z_jj6 * 9i + 4i]) + dot(z_q5, z_kv32[z_jj6 * 9i + 5i]) + dot(z_q6, z_kv32[z_jj6 * 9i + 6i]) + dot(z_q7, z_kv32[z_jj6 * 9i + 7i]);
        let z_s6: f32 = select(bitcast<f32>(0xff800000u), (z_dot6 * z_scale), z_qok && z_j6 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j6, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s6);
        let z_jj7: i32 = z_r + 28i;
        let z_j7: i32 = z_k0 + z_jj7;
        let z_dot7: f32 = dot(z_q0, z_kv32[z_jj7 * 9i + 0i]) + dot(z_q1, z_kv32[z_jj7 * 9i + 1i]) + dot(z_q2, z_kv32[z_jj7 * 9i + 2i]) + dot(z_q3, z_kv32[z_jj7 * 9i + 3i]) + dot(z_q4, z_kv32[z_jj7 * 9i + 4i]) + dot(z_q5, z_kv32[z_jj7 * 9i + 5i]) + dot(z_q6, z_kv32[z_jj7 * 9i + 6i]) + dot(z_q7, z_kv32[z_jj7 * 9i + 7i]);
        let z_s7: f32 = select(bitcast<f32>(0xff800000u), (z_dot7 * z_scale), z_qok && z_j7 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j7, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s7);
        let z_mnew: f32 = max(z_m, z_tmax);
        if (!(z_mnew <= bitcast<f32>(0xff800000u))) {
            let z_alpha: f32 = select(0.0f, exp(z_m - z_mnew), !(z_m <= bitcast<f32>(0xff800000u)));
            z_l = z_l * z_alpha;
            z_o0 = z_o0 * z_alpha;
            z_o1 = z_o1 * z_alpha;
            z_o2 = z_o2 * z_alpha;
            z_o3 = z_o3 * z_alpha;
            z_o4 = z_o4 * z_alpha;
            z_o5 = z_o5 * z_alpha;
            z_o6 = z_o6 * z_alpha;
            z_o7 = z_o7 * z_alpha;
            let z_p0: f32 = select(0.0f, exp(z_s0 - z_mnew), !(z_s0 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p0;
            z_o0 = fma(vec4<f32>(z_p0), z_kv32[288i + z_jj0 * 9i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p0), z_kv32[288i + z_jj0 * 9i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p0), z_kv32[288i + z_jj0 * 9i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p0), z_kv32[288i + z_jj0 * 9i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p0), z_kv32[288i + z_jj0 * 9i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p0), z_kv32[288i + z_jj0 * 9i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p0), z_kv32[288i + z_jj0 * 9i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p0), z_kv32[288i + z_jj0 * 9i + 7i], z_o7);
            let z_p1: f32 = select(0.0f, exp(z_s1 - z_mnew), !(z_s1 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p1;
            z_o0 = fma(vec4<f32>(z_p1), z_kv32[288i + z_jj1 * 9i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p1), z_kv32[288i + z_jj1 * 9i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p1), z_kv32[288i + z_jj1 * 9i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p1), z_kv32[288i + z_jj1 * 9i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p1), z_kv32[288i + z_jj1 * 9i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p1), z_kv32[288i + z_jj1 * 9i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p1), z_kv32[288i + z_jj1 * 9i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p1), z_kv32[288i + z_jj1 * 9i + 7i], z_o7);
            let z_p2: f32 = select(0.0f, exp(z_s2 - z_mnew), !(z_s2 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p2;
            z_o0 = fma(vec4<f32>(z_p2), z_kv32[288i + z_jj2 * 9i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p2), z_kv32[288i + z_jj2 * 9i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p2), z_kv32[288i + z_jj2 * 9i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p2), z_kv32[288i + z_jj2 * 9i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p2), z_kv32[288i + z_jj2 * 9i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p2), z_kv32[288i + z_jj2 * 9i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p2), z_kv32[288i + z_jj2 * 9i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p2), z_kv32[288i + z_jj2 * 9i + 7i], z_o7);
            let z_p3: f32 = select(0.0f, exp(z_s3 - z_mnew), !(z_s3 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p3;
            z_o0 = fma(vec4<f32>(z_p3), z_kv32[288i + z_jj3 * 9i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p3), z_kv32[288i + z_jj3 * 9i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p3), z_kv32[288i + z_jj3 * 9i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p3), z_kv32[288i + z_jj3 * 9i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p3), z_kv32[288i + z_jj3 * 9i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p3), z_kv32[288i + z_jj3 * 9i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p3), z_kv32[288i + z_jj3 * 9i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p3), z_kv32[288i + z_jj3 * 9i + 7i], z_o7);
            let z_p4: f32 = select(0.0f, exp(z_s4 - z_mnew), !(z_s4 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p4;
            z_o0 = fma(vec4<f32>(z_p4), z_kv32[288i + z_jj4 * 9i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p4), z_kv32[288i + z_jj4 * 9i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p4), z_kv32[288i + z_jj4 * 9i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p4), z_kv32[288i + z_jj4 * 9i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p4), z_kv32[288i + z_jj4 * 9i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p4), z_kv32[288i + z_jj4 * 9i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p4), z_kv32[288i + z_jj4 * 9i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p4), z_kv32[288i + z_jj4 * 9i + 7i], z_o7);
            let z_p5: f32 = select(0.0f, exp(z_s5 - z_mnew), !(z_s5 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p5;
            z_o0 = fma(vec4<f32>(z_p5), z_kv32[288i + z_jj5 * 9i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p5), z_kv32[288i + z_jj5 * 9i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p5), z_kv32[288i + z_jj5 * 9i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p5), z_kv32[288i + z_jj5 * 9i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p5), z_kv32[288i + z_jj5 * 9i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p5), z_kv32[288i + z_jj5 * 9i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p5), z_kv32[288i + z_jj5 * 9i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p5), z_kv32[288i + z_jj5 * 9i + 7i], z_o7);
            let z_p6: f32 = select(0.0f, exp(z_s6 - z_mnew), !(z_s6 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p6;
            z_o0 = fma(vec4<f32>(z_p6), z_kv32[288i + z_jj6 * 9i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p6), z_kv32[288i + z_jj6 * 9i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p6), z_kv32[288i + z_jj6 * 9i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p6), z_kv32[288i + z_jj6 * 9i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p6), z_kv32[288i + z_jj6 * 9i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p6), z_kv32[288i + z_jj6 * 9i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p6), z_kv32[288i + z_jj6 * 9i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p6), z_kv32[288i + z_jj6 * 9i + 7i], z_o7);
            let z_p7: f32 = select(0.0f, exp(z_s7 - z_mnew), !(z_s7 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p7;
            z_o0 = fma(vec4<f32>(z_p7), z_kv32[288i + z_jj7 * 9i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p7), z_kv32[288i + z_jj7 * 9i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p7), z_kv32[288i + z_jj7 * 9i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p7), z_kv32[288i + z_jj7 * 9i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p7), z_kv32[288i + z_jj7 * 9i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p7), z_kv32[288i + z_jj7 * 9i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p7), z_kv32[288i + z_jj7 * 9i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p7), z_kv32[288i + z_jj7 * 9i + 7i], z_o7);
            z_m = z_mnew;
        }
        workgroupBarrier();
    }
    // merge the 4 lanes of each query
    z_ml32[z_t] = z_m;
    z_ml32[128i + z_t] = z_l;
    workgroupBarrier();
    var z_M: f32 = bitcast<f32>(0xff800000u);
    for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
        z_M = max(z_M, z_ml32[z_q * 4i + z_x]);
    }
    var z_L: f32 = 0.0f;
    for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
        let z_mx: f32 = z_ml32[z_q * 4i + z_x];
        z_L = z_L + select(0.0f, z_ml32[128i + z_q * 4i + z_x] * exp(z_mx - z_M), !(z_mx <= bitcast<f32>(0xff800000u)));
    }
    let z_f: f32 = select(0.0f, exp(z_m - z_M), !(z_m <= bitcast<f32>(0xff800000u)));
    z_o0 = z_o0 * z_f;
    z_o1 = z_o1 * z_f;
    z_o2 = z_o2 * z_f;
    z_o3 = z_o3 * z_f;
    z_o4 = z_o4 * z_f;
    z_o5 = z_o5 * z_f;
    z_o6 = z_o6 * z_f;
    z_o7 = z_o7 * z_f;
    for (var z_x: i32 = 1i; z_x < 4i; z_x = z_x + 1i) {
        if (z_r == z_x) {
            z_kv32[z_q * 8i + 0i] = z_o0;
            z_kv32[z_q * 8i + 1i] = z_o1;
            z_kv32[z_q * 8i + 2i] = z_o2;
            z_kv32[z_q * 8i + 3i] = z_o3;
            z_kv32[z_q * 8i + 4i] = z_o4;
            z_kv32[z_q * 8i + 5i] = z_o5;
            z_kv32[z_q * 8i + 6i] = z_o6;
            z_kv32[z_q * 8i + 7i] = z_o7;
        }
        workgroupBarrier();
        if (z_r == 0i) {
            z_o0 = z_o0 + z_kv32[z_q * 8i + 0i];
            z_o1 = z_o1 + z_kv32[z_q * 8i + 1i];
            z_o2 = z_o2 + z_kv32[z_q * 8i + 2i];
            z_o3 = z_o3 + z_kv32[z_q * 8i + 3i];
            z_o4 = z_o4 + z_kv32[z_q * 8i + 4i];
            z_o5 = z_o5 + z_kv32[z_q * 8i + 5i];
            z_o6 = z_o6 + z_kv32[z_q * 8i + 6i];
            z_o7 = z_o7 + z_kv32[z_q * 8i + 7i];
        }
        workgroupBarrier();
    }
    if (z_r == 0i && z_qok) {
        let z_obase: i32 = (z_b * P.out_d1 * P.out_d2 + z_h * P.out_d2 + z_i) * P.out_d3;
        let z_inv: f32 = select(0.0f, 1.0f / z_L, z_L > 0.0f);
        if (0i < z_DV) { out[z_obase + 0i] = z_o0[0] * z_inv; }
        if (1i < z_DV) { out[z_obase + 1i] = z_o0[1] * z_inv; }
        if (2i < z_DV) { out[z_obase + 2i] = z_o0[2] * z_inv; }
        if (3i < z_DV) { out[z_obase + 3i] = z_o0[3] * z_inv; }
        if (4i < z_DV) { out[z_obase + 4i] = z_o1[0] * z_inv; }
        if (5i < z_DV) { out[z_obase + 5i] = z_o1[1] * z_inv; }
        if (6i < z_DV) { out[z_obase + 6i] = z_o1[2] * z_inv; }
        if (7i < z_DV) { out[z_obase + 7i] = z_o1[3] * z_inv; }
        if (8i < z_DV) { out[z_obase + 8i] = z_o2[0] * z_inv; }
        if (9i < z_DV) { out[z_obase + 9i] = z_o2[1] * z_inv; }
        if (10i < z_DV) { out[z_obase + 10i] = z_o2[2] * z_inv; }
        if (11i < z_DV) { out[z_obase + 11i] = z_o2[3] * z_inv; }
        if (12i < z_DV) { out[z_obase + 12i] = z_o3[0] * z_inv; }
        if (13i < z_DV) { out[z_obase + 13i] = z_o3[1] * z_inv; }
        if (14i < z_DV) { out[z_obase + 14i] = z_o3[2] * z_inv; }
        if (15i < z_DV) { out[z_obase + 15i] = z_o3[3] * z_inv; }
        if (16i < z_DV) { out[z_obase + 16i] = z_o4[0] * z_inv; }
        if (17i < z_DV) { out[z_obase + 17i] = z_o4[1] * z_inv; }
        if (18i < z_DV) { out[z_obase + 18i] = z_o4[2] * z_inv; }
        if (19i < z_DV) { out[z_obase + 19i] = z_o4[3] * z_inv; }
        if (20i < z_DV) { out[z_obase + 20i] = z_o5[0] * z_inv; }
        if (21i < z_DV) { out[z_obase + 21i] = z_o5[1] * z_inv; }
        if (22i < z_DV) { out[z_obase + 22i] = z_o5[2] * z_inv; }
        if (23i < z_DV) { out[z_obase + 23i] = z_o5[3] * z_inv; }
        if (24i < z_DV) { out[z_obase + 24i] = z_o6[0] * z_inv; }
        if (25i < z_DV) { out[z_obase + 25i] = z_o6[1] * z_inv; }
        if (26i < z_DV) { out[z_obase + 26i] = z_o6[2] * z_inv; }
        if (27i < z_DV) { out[z_obase + 27i] = z_o6[3] * z_inv; }
        if (28i < z_DV) { out[z_obase + 28i] = z_o7[0] * z_inv; }
        if (29i < z_DV) { out[z_obase + 29i] = z_o7[1] * z_inv; }
        if (30i < z_DV) { out[z_obase + 30i] = z_o7[2] * z_inv; }
        if (31i < z_DV) { out[z_obase + 31i] = z_o7[3] * z_inv; }
    }
}

// head_dim up to 64: 32 queries per workgroup, 4 invocations per query, key tiles of 16
@compute @workgroup_size(128, 1, 1)
fn kernel_d64(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    let z_scale: f32 = (1.0f / sqrt(f32(P.head_dim)));
    let z_qblocks: i32 = (P.z_n_i + 31i) / 32i;
    if (z_wid >= P.z_n_b * P.z_n_h * z_qblocks) { return; }
    let z_t: i32 = i32(z_lid.x);
    let z_q: i32 = z_t / 4i;
    let z_r: i32 = z_t % 4i;
    let z_bh: i32 = z_wid / z_qblocks;
    let z_b: i32 = z_bh / P.z_n_h;
    let z_h: i32 = z_bh % P.z_n_h;
    let z_i: i32 = (z_wid % z_qblocks) * 32i + z_q;
    let z_qok: bool = z_i < P.z_n_i;
    let z_S: i32 = P.z_n_keys;
    let z_DQ: i32 = P.Q_d3;
    let z_DV: i32 = P.out_d3;
    let z_qbase: i32 = z_b * P.Q_d1 * P.Q_d2 + z_h * P.Q_d2 + min(z_i, P.Q_d2 - 1i);
    let z_kbase: i32 = z_b * P.K_d1 * P.K_d2 + z_h * P.K_d2;
    let z_vbase: i32 = z_b * P.V_d1 * P.V_d2 + z_h * P.V_d2;
    // this query's row in registers (zero past head_dim)
    let z_q0: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 0i], 0i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 1i], 1i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 2i], 2i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 3i], 3i < z_DQ));
    let z_q1: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 4i], 4i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 5i], 5i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 6i], 6i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 7i], 7i < z_DQ));
    let z_q2: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 8i], 8i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 9i], 9i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 10i], 10i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 11i], 11i < z_DQ));
    let z_q3: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 12i], 12i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 13i], 13i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 14i], 14i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 15i], 15i < z_DQ));
    let z_q4: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 16i], 16i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 17i], 17i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 18i], 18i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 19i], 19i < z_DQ));
    let z_q5: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 20i], 20i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 21i], 21i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 22i], 22i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 23i], 23i < z_DQ));
    let z_q6: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 24i], 24i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 25i], 25i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 26i], 26i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 27i], 27i < z_DQ));
    let z_q7: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 28i], 28i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 29i], 29i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 30i], 30i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 31i], 31i < z_DQ));
    let z_q8: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 32i], 32i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 33i], 33i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 34i], 34i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 35i], 35i < z_DQ));
    let z_q9: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 36i], 36i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 37i], 37i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 38i], 38i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 39i], 39i < z_DQ));
    let z_q10: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 40i], 40i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 41i], 41i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 42i], 42i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 43i], 43i < z_DQ));
    let z_q11: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 44i], 44i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 45i], 45i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 46i], 46i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 47i], 47i < z_DQ));
    let z_q12: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 48i], 48i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 49i], 49i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 50i], 50i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 51i], 51i < z_DQ));
    let z_q13: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 52i], 52i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 53i], 53i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 54i], 54i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 55i], 55i < z_DQ));
    let z_q14: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 56i], 56i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 57i], 57i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 58i], 58i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 59i], 59i < z_DQ));
    let z_q15: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 60i], 60i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 61i], 61i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 62i], 62i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 63i], 63i < z_DQ));
    var z_m: f32 = bitcast<f32>(0xff800000u);
    var z_l: f32 = 0.0f;
    var z_o0: vec4<f32> = vec4<f32>(0.0f);
    var z_o1: vec4<f32> = vec4<f32>(0.0f);
    var z_o2: vec4<f32> = vec4<f32>(0.0f);
    var z_o3: vec4<f32> = vec4<f32>(0.0f);
    var z_o4: vec4<f32> = vec4<f32>(0.0f);
    var z_o5: vec4<f32> = vec4<f32>(0.0f);
    var z_o6: vec4<f32> = vec4<f32>(0.0f);
    var z_o7: vec4<f32> = vec4<f32>(0.0f);
    var z_o8: vec4<f32> = vec4<f32>(0.0f);
    var z_o9: vec4<f32> = vec4<f32>(0.0f);
    var z_o10: vec4<f32> = vec4<f32>(0.0f);
    var z_o11: vec4<f32> = vec4<f32>(0.0f);
    var z_o12: vec4<f32> = vec4<f32>(0.0f);
    var z_o13: vec4<f32> = vec4<f32>(0.0f);
    var z_o14: vec4<f32> = vec4<f32>(0.0f);
    var z_o15: vec4<f32> = vec4<f32>(0.0f);
    for (var z_k0: i32 = 0i; z_k0 < z_S; z_k0 = z_k0 + 16i) {
        // K and V rows z_k0 .. z_k0 + 16 into workgroup memory
        for (var z_e: i32 = z_t; z_e < 256i; z_e = z_e + 128i) {
            let z_row: i32 = z_e / 16i;
            let z_c: i32 = z_e % 16i;
            let z_j: i32 = min(z_k0 + z_row, z_S - 1i);
            var z_kv4: vec4<f32> = vec4<f32>(0.0f);
            var z_vv4: vec4<f32> = vec4<f32>(0.0f);
            for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
                let z_d: i32 = z_c * 4i + z_x;
                z_kv4[z_x] = select(0.0f, K[(z_kbase + z_j) * P.K_d3 + min(z_d, P.K_d3 - 1i)], z_d < z_DQ);
                z_vv4[z_x] = select(0.0f, V[(z_vbase + z_j) * P.V_d3 + min(z_d, P.V_d3 - 1i)], z_d < z_DV);
            }
            z_kv64[z_row * 17i + z_c] = z_kv4;
            z_kv64[272i + z_row * 17i + z_c] = z_vv4;
        }
        workgroupBarrier();
        // scores of keys z_k0 + z_r + 4 * u
        var z_tmax: f32 = bitcast<f32>(0xff800000u);
        let z_jj0: i32 = z_r + 0i;
        let z_j0: i32 = z_k0 + z_jj0;
        let z_dot0: f32 = dot(z_q0, z_kv64[z_jj0 * 17i + 0i]) + dot(z_q1, z_kv64[z_jj0 * 17i + 1i]) + dot(z_q2, z_kv64[z_jj0 * 17i + 2i]) + dot(z_q3, z_kv64[z_jj0 * 17i + 3i]) + dot(z_q4, z_kv64[z_jj0 * 17i + 4i]) + dot(z_q5, z_kv64[z_jj0 * 17i + 5i]) + dot(z_q6, z_kv64[z_jj0 * 17i + 6i]) + dot(z_q7, z_kv64[z_jj0 * 17i + 7i]) + dot(z_q8, z_kv64[z_jj0 * 17i + 8i]) + dot(z_q9, z_kv64[z_jj0 * 17i + 9i]) + dot(z_q10, z_kv64[z_jj0 * 17i + 10i]) + dot(z_q11, z_kv64[z_jj0 * 17i + 11i]) + dot(z_q12, z_kv64[z_jj0 * 17i + 12i]) + dot(z_q13, z_kv64[z_jj0 * 17i + 13i]) + dot(z_q14, z_kv64[z_jj0 * 17i + 14i]) + dot(z_q15, z_kv64[z_jj0 * 17i + 15i]);
        let z_s0: f32 = select(bitcast<f32>(0xff800000u), (z_dot0 * z_scale), z_qok && z_j0 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j0, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s0);
        let z_jj1: i32 = z_r + 4i;
        let z_j1: i32 = z_k0 + z_jj1;
        let z_dot1: f32 = dot(z_q0, z_kv64[z_jj1 * 17i + 0i]) + dot(z_q1, z_kv64[z_jj1 * 17i + 1i]) + dot(z_q2, z_kv64[z_jj1 * 17i + 2i]) + dot(z_q3, z_kv64[z_jj1 * 17i + 3i]) + dot(z_q4, z_kv64[z_jj1 * 17i + 4i]) + dot(z_q5, z_kv64[z_jj1 * 17i + 5i]) + dot(z_q6, z_kv64[z_jj1 * 17i + 6i]) + dot(z_q7, z_kv64[z_jj1 * 17i + 7i]) + dot(z_q8, z_kv64[z_jj1 * 17i + 8i]) + dot(z_q9, z_kv64[z_jj1 * 17i + 9i]) + dot(z_q10, z_kv64[z_jj1 * 17i + 10i]) + dot(z_q11, z_kv64[z_jj1 * 17i + 11i]) + dot(z_q12, z_kv64[z_jj1 * 17i + 12i]) + dot(z_q13, z_kv64[z_jj1 * 17i + 13i]) + dot(z_q14, z_kv64[z_jj1 * 17i + 14i]) + dot(z_q15, z_kv64[z_jj1 * 17i + 15i]);
        let z_s1: f32 = select(bitcast<f32>(0xff800000u), (z_dot1 * z_scale), z_qok && z_j1 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j1, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s1);
        let z_jj2: i32 = z_r + 8i;
        let z_j2: i32 = z_k0 + z_jj2;
        let z_dot2: f32 = dot(z_q0, z_kv64[z_jj2 * 17i + 0i]) + dot(z_q1, z_kv64[z_jj2 * 17i + 1i]) + dot(z_q2, z_kv64[z_jj2 * 17i + 2i]) + dot(z_q3, z_kv64[z_jj2 * 17i + 3i]) + dot(z_q4, z_kv64[z_jj2 * 17i + 4i]) + dot(z_q5, z_kv64[z_jj2 * 17i + 5i]) + dot(z_q6, z_kv64[z_jj2 * 17i + 6i]) + dot(z_q7, z_kv64[z_jj2 * 17i + 7i]) + dot(z_q8, z_kv64[z_jj2 * 17i + 8i]) + dot(z_q9, z_kv64[z_jj2 * 17i + 9i]) + dot(z_q10, z_kv64[z_jj2 * 17i + 10i]) + dot(z_q11, z_kv64[z_jj2 * 17i + 11i]) + dot(z_q12, z_kv64[z_jj2 * 17i + 12i]) + dot(z_q13, z_kv64[z_jj2 * 17i + 13i]) + dot(z_q14, z_kv64[z_jj2 * 17i + 14i]) + dot(z_q15, z_kv64[z_jj2 * 17i + 15i]);
        let z_s2: f32 = select(bitcast<f32>(0xff800000u), (z_dot2 * z_scale), z_qok && z_j2 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j2, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s2);
        let z_jj3: i32 = z_r + 12i;
        let z_j3: i32 = z_k0 + z_jj3;
        let z_dot3: f32 = dot(z_q0, z_kv64[z_jj3 * 17i + 0i]) + dot(z_q1, z_kv64[z_jj3 * 17i + 1i]) + dot(z_q2, z_kv64[z_jj3 * 17i + 2i]) + dot(z_q3, z_kv64[z_jj3 * 17i + 3i]) + dot(z_q4, z_kv64[z_jj3 * 17i + 4i]) + dot(z_q5, z_kv64[z_jj3 * 17i + 5i]) + dot(z_q6, z_kv64[z_jj3 * 17i + 6i]) + dot(z_q7, z_kv64[z_jj3 * 17i + 7i]) + dot(z_q8, z_kv64[z_jj3 * 17i + 8i]) + dot(z_q9, z_kv64[z_jj3 * 17i + 9i]) + dot(z_q10, z_kv64[z_jj3 * 17i + 10i]) + dot(z_q11, z_kv64[z_jj3 * 17i + 11i]) + dot(z_q12, z_kv64[z_jj3 * 17i + 12i]) + dot(z_q13, z_kv64[z_jj3 * 17i + 13i]) + dot(z_q14, z_kv64[z_jj3 * 17i + 14i]) + dot(z_q15, z_kv64[z_jj3 * 17i + 15i]);
        let z_s3: f32 = select(bitcast<f32>(0xff800000u), (z_dot3 * z_scale), z_qok && z_j3 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j3, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s3);
        let z_mnew: f32 = max(z_m, z_tmax);
        if (!(z_mnew <= bitcast<f32>(0xff800000u))) {
            let z_alpha: f32 = select(0.0f, exp(z_m - z_mnew), !(z_m <= bitcast<f32>(0xff800000u)));
            z_l = z_l * z_alpha;
            z_o0 = z_o0 * z_alpha;
            z_o1 = z_o1 * z_alpha;
            z_o2 = z_o2 * z_alpha;
            z_o3 = z_o3 * z_alpha;
            z_o4 = z_o4 * z_alpha;
            z_o5 = z_o5 * z_alpha;
            z_o6 = z_o6 * z_alpha;
            z_o7 = z_o7 * z_alpha;
            z_o8 = z_o8 * z_alpha;
            z_o9 = z_o9 * z_alpha;
            z_o10 = z_o10 * z_alpha;
            z_o11 = z_o11 * z_alpha;
            z_o12 = z_o12 * z_alpha;
            z_o13 = z_o13 * z_alpha;
            z_o14 = z_o14 * z_alpha;
            z_o15 = z_o15 * z_alpha;
            let z_p0: f32 = select(0.0f, exp(z_s0 - z_mnew), !(z_s0 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p0;
            z_o0 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 7i], z_o7);
            z_o8 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 8i], z_o8);
            z_o9 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 9i], z_o9);
            z_o10 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 10i], z_o10);
            z_o11 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 11i], z_o11);
            z_o12 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 12i], z_o12);
            z_o13 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 13i], z_o13);
            z_o14 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 14i], z_o14);
            z_o15 = fma(vec4<f32>(z_p0), z_kv64[272i + z_jj0 * 17i + 15i], z_o15);
            let z_p1: f32 = select(0.0f, exp(z_s1 - z_mnew), !(z_s1 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p1;
            z_o0 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 7i], z_o7);
            z_o8 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 8i], z_o8);
            z_o9 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 9i], z_o9);
            z_o10 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 10i], z_o10);
            z_o11 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 11i], z_o11);
            z_o12 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 12i], z_o12);
            z_o13 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 13i], z_o13);
            z_o14 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 14i], z_o14);
            z_o15 = fma(vec4<f32>(z_p1), z_kv64[272i + z_jj1 * 17i + 15i], z_o15);
            let z_p2: f32 = select(0.0f, exp(z_s2 - z_mnew), !(z_s2 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p2;
            z_o0 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 7i], z_o7);
            z_o8 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 8i], z_o8);
            z_o9 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 9i], z_o9);
            z_o10 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 10i], z_o10);
            z_o11 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 11i], z_o11);
            z_o12 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 12i], z_o12);
            z_o13 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 13i], z_o13);
            z_o14 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 14i], z_o14);
            z_o15 = fma(vec4<f32>(z_p2), z_kv64[272i + z_jj2 * 17i + 15i], z_o15);
            let z_p3: f32 = select(0.0f, exp(z_s3 - z_mnew), !(z_s3 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p3;
            z_o0 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 7i], z_o7);
            z_o8 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 8i], z_o8);
            z_o9 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 9i], z_o9);
            z_o10 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 10i], z_o10);
            z_o11 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 11i], z_o11);
            z_o12 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 12i], z_o12);
            z_o13 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 13i], z_o13);
            z_o14 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 14i], z_o14);
            z_o15 = fma(vec4<f32>(z_p3), z_kv64[272i + z_jj3 * 17i + 15i], z_o15);
            z_m = z_mnew;
        }
        workgroupBarrier();
    }
    // merge the 4 lanes of each query
    z_ml64[z_t] = z_m;
    z_ml64[128i + z_t] = z_l;
    workgroupBarrier();
    var z_M: f32 = bitcast<f32>(0xff800000u);
    for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
        z_M = max(z_M, z_ml64[z_q * 4i + z_x]);
    }
    var z_L: f32 = 0.0f;
    for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
        let z_mx: f32 = z_ml64[z_q * 4i + z_x];
        z_L = z_L + select(0.0f, z_ml64[128i + z_q * 4i + z_x] * exp(z_mx - z_M), !(z_mx <= bitcast<f32>(0xff800000u)));
    }
    let z_f: f32 = select(0.0f, exp(z_m - z_M), !(z_m <= bitcast<f32>(0xff800000u)));
    z_o0 = z_o0 * z_f;
    z_o1 = z_o1 * z_f;
    z_o2 = z_o2 * z_f;
    z_o3 = z_o3 * z_f;
    z_o4 = z_o4 * z_f;
    z_o5 = z_o5 * z_f;
    z_o6 = z_o6 * z_f;
    z_o7 = z_o7 * z_f;
    z_o8 = z_o8 * z_f;
    z_o9 = z_o9 * z_f;
    z_o10 = z_o10 * z_f;
    z_o11 = z_o11 * z_f;
    z_o12 = z_o12 * z_f;
    z_o13 = z_o13 * z_f;
    z_o14 = z_o14 * z_f;
    z_o15 = z_o15 * z_f;
    for (var z_x: i32 = 1i; z_x < 4i; z_x = z_x + 1i) {
        if (z_r == z_x) {
            z_kv64[z_q * 16i + 0i] = z_o0;
            z_kv64[z_q * 16i + 1i] = z_o1;
            z_kv64[z_q * 16i + 2i] = z_o2;
            z_kv64[z_q * 16i + 3i] = z_o3;
            z_kv64[z_q * 16i + 4i] = z_o4;
            z_kv64[z_q * 16i + 5i] = z_o5;
            z_kv64[z_q * 16i + 6i] = z_o6;
            z_kv64[z_q * 16i + 7i] = z_o7;
            z_kv64[z_q * 16i + 8i] = z_o8;
            z_kv64[z_q * 16i + 9i] = z_o9;
            z_kv64[z_q * 16i + 10i] = z_o10;
            z_kv64[z_q * 16i + 11i] = z_o11;
            z_kv64[z_q * 16i + 12i] = z_o12;
            z_kv64[z_q * 16i + 13i] = z_o13;
            z_kv64[z_q * 16i + 14i] = z_o14;
            z_kv64[z_q * 16i + 15i] = z_o15;
        }
        workgroupBarrier();
        if (z_r == 0i) {
            z_o0 = z_o0 + z_kv64[z_q * 16i + 0i];
            z_o1 = z_o1 + z_kv64[z_q * 16i + 1i];
            z_o2 = z_o2 + z_kv64[z_q * 16i + 2i];
            z_o3 = z_o3 + z_kv64[z_q * 16i + 3i];
            z_o4 = z_o4 + z_kv64[z_q * 16i + 4i];
            z_o5 = z_o5 + z_kv64[z_q * 16i + 5i];
            z_o6 = z_o6 + z_kv64[z_q * 16i + 6i];
            z_o7 = z_o7 + z_kv64[z_q * 16i + 7i];
            z_o8 = z_o8 + z_kv64[z_q * 16i + 8i];
            z_o9 = z_o9 + z_kv64[z_q * 16i + 9i];
            z_o10 = z_o10 + z_kv64[z_q * 16i + 10i];
            z_o11 = z_o11 + z_kv64[z_q * 16i + 11i];
            z_o12 = z_o12 + z_kv64[z_q * 16i + 12i];
            z_o13 = z_o13 + z_kv64[z_q * 16i + 13i];
            z_o14 = z_o14 + z_kv64[z_q * 16i + 14i];
            z_o15 = z_o15 + z_kv64[z_q * 16i + 15i];
        }
        workgroupBarrier();
    }
    if (z_r == 0i && z_qok) {
        let z_obase: i32 = (z_b * P.out_d1 * P.out_d2 + z_h * P.out_d2 + z_i) * P.out_d3;
        let z_inv: f32 = select(0.0f, 1.0f / z_L, z_L > 0.0f);
        if (0i < z_DV) { out[z_obase + 0i] = z_o0[0] * z_inv; }
        if (1i < z_DV) { out[z_obase + 1i] = z_o0[1] * z_inv; }
        if (2i < z_DV) { out[z_obase + 2i] = z_o0[2] * z_inv; }
        if (3i < z_DV) { out[z_obase + 3i] = z_o0[3] * z_inv; }
        if (4i < z_DV) { out[z_obase + 4i] = z_o1[0] * z_inv; }
        if (5i < z_DV) { out[z_obase + 5i] = z_o1[1] * z_inv; }
        if (6i < z_DV) { out[z_obase + 6i] = z_o1[2] * z_inv; }
        if (7i < z_DV) { out[z_obase + 7i] = z_o1[3] * z_inv; }
        if (8i < z_DV) { out[z_obase + 8i] = z_o2[0] * z_inv; }
        if (9i < z_DV) { out[z_obase + 9i] = z_o2[1] * z_inv; }
        if (10i < z_DV) { out[z_obase + 10i] = z_o2[2] * z_inv; }
        if (11i < z_DV) { out[z_obase + 11i] = z_o2[3] * z_inv; }
        if (12i < z_DV) { out[z_obase + 12i] = z_o3[0] * z_inv; }
        if (13i < z_DV) { out[z_obase + 13i] = z_o3[1] * z_inv; }
        if (14i < z_DV) { out[z_obase + 14i] = z_o3[2] * z_inv; }
        if (15i < z_DV) { out[z_obase + 15i] = z_o3[3] * z_inv; }
        if (16i < z_DV) { out[z_obase + 16i] = z_o4[0] * z_inv; }
        if (17i < z_DV) { out[z_obase + 17i] = z_o4[1] * z_inv; }
        if (18i < z_DV) { out[z_obase + 18i] = z_o4[2] * z_inv; }
        if (19i < z_DV) { out[z_obase + 19i] = z_o4[3] * z_inv; }
        if (20i < z_DV) { out[z_obase + 20i] = z_o5[0] * z_inv; }
        if (21i < z_DV) { out[z_obase + 21i] = z_o5[1] * z_inv; }
        if (22i < z_DV) { out[z_obase + 22i] = z_o5[2] * z_inv; }
        if (23i < z_DV) { out[z_obase + 23i] = z_o5[3] * z_inv; }
        if (24i < z_DV) { out[z_obase + 24i] = z_o6[0] * z_inv; }
        if (25i < z_DV) { out[z_obase + 25i] = z_o6[1] * z_inv; }
        if (26i < z_DV) { out[z_obase + 26i] = z_o6[2] * z_inv; }
        if (27i < z_DV) { out[z_obase + 27i] = z_o6[3] * z_inv; }
        if (28i < z_DV) { out[z_obase + 28i] = z_o7[0] * z_inv; }
        if (29i < z_DV) { out[z_obase + 29i] = z_o7[1] * z_inv; }
        if (30i < z_DV) { out[z_obase + 30i] = z_o7[2] * z_inv; }
        if (31i < z_DV) { out[z_obase + 31i] = z_o7[3] * z_inv; }
        if (32i < z_DV) { out[z_obase + 32i] = z_o8[0] * z_inv; }
        if (33i < z_DV) { out[z_obase + 33i] = z_o8[1] * z_inv; }
        if (34i < z_DV) { out[z_obase + 34i] = z_o8[2] * z_inv; }
        if (35i < z_DV) { out[z_obase + 35i] = z_o8[3] * z_inv; }
        if (36i < z_DV) { out[z_obase + 36i] = z_o9[0] * z_inv; }
        if (37i < z_DV) { out[z_obase + 37i] = z_o9[1] * z_inv; }
        if (38i < z_DV) { out[z_obase + 38i] = z_o9[2] * z_inv; }
        if (39i < z_DV) { out[z_obase + 39i] = z_o9[3] * z_inv; }
        if (40i < z_DV) { out[z_obase + 40i] = z_o10[0] * z_inv; }
        if (41i < z_DV) { out[z_obase + 41i] = z_o10[1] * z_inv; }
        if (42i < z_DV) { out[z_obase + 42i] = z_o10[2] * z_inv; }
        if (43i < z_DV) { out[z_obase + 43i] = z_o10[3] * z_inv; }
        if (44i < z_DV) { out[z_obase + 44i] = z_o11[0] * z_inv; }
        if (45i < z_DV) { out[z_obase + 45i] = z_o11[1] * z_inv; }
        if (46i < z_DV) { out[z_obase + 46i] = z_o11[2] * z_inv; }
        if (47i < z_DV) { out[z_obase + 47i] = z_o11[3] * z_inv; }
        if (48i < z_DV) { out[z_obase + 48i] = z_o12[0] * z_inv; }
        if (49i < z_DV) { out[z_obase + 49i] = z_o12[1] * z_inv; }
        if (50i < z_DV) { out[z_obase + 50i] = z_o12[2] * z_inv; }
        if (51i < z_DV) { out[z_obase + 51i] = z_o12[3] * z_inv; }
        if (52i < z_DV) { out[z_obase + 52i] = z_o13[0] * z_inv; }
        if (53i < z_DV) { out[z_obase + 53i] = z_o13[1] * z_inv; }
        if (54i < z_DV) { out[z_obase + 54i] = z_o13[2] * z_inv; }
        if (55i < z_DV) { out[z_obase + 55i] = z_o13[3] * z_inv; }
        if (56i < z_DV) { out[z_obase + 56i] = z_o14[0] * z_inv; }
        if (57i < z_DV) { out[z_obase + 57i] = z_o14[1] * z_inv; }
        if (58i < z_DV) { out[z_obase + 58i] = z_o14[2] * z_inv; }
        if (59i < z_DV) { out[z_obase + 59i] = z_o14[3] * z_inv; }
        if (60i < z_DV) { out[z_obase + 60i] = z_o15[0] * z_inv; }
        if (61i < z_DV) { out[z_obase + 61i] = z_o15[1] * z_inv; }
        if (62i < z_DV) { out[z_obase + 62i] = z_o15[2] * z_inv; }
        if (63i < z_DV) { out[z_obase + 63i] = z_o15[3] * z_inv; }
    }
}

// head_dim up to 128: 16 queries per workgroup, 4 invocations per query, key tiles of 8
@compute @workgroup_size(64, 1, 1)
fn kernel_d128(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    let z_scale: f32 = (1.0f / sqrt(f32(P.head_dim)));
    let z_qblocks: i32 = (P.z_n_i + 15i) / 16i;
    if (z_wid >= P.z_n_b * P.z_n_h * z_qblocks) { return; }
    let z_t: i32 = i32(z_lid.x);
    let z_q: i32 = z_t / 4i;
    let z_r: i32 = z_t % 4i;
    let z_bh: i32 = z_wid / z_qblocks;
    let z_b: i32 = z_bh / P.z_n_h;
    let z_h: i32 = z_bh % P.z_n_h;
    let z_i: i32 = (z_wid % z_qblocks) * 16i + z_q;
    let z_qok: bool = z_i < P.z_n_i;
    let z_S: i32 = P.z_n_keys;
    let z_DQ: i32 = P.Q_d3;
    let z_DV: i32 = P.out_d3;
    let z_qbase: i32 = z_b * P.Q_d1 * P.Q_d2 + z_h * P.Q_d2 + min(z_i, P.Q_d2 - 1i);
    let z_kbase: i32 = z_b * P.K_d1 * P.K_d2 + z_h * P.K_d2;
    let z_vbase: i32 = z_b * P.V_d1 * P.V_d2 + z_h * P.V_d2;
    // this query's row in registers (zero past head_dim)
    let z_q0: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 0i], 0i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 1i], 1i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 2i], 2i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 3i], 3i < z_DQ));
    let z_q1: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 4i], 4i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 5i], 5i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 6i], 6i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 7i], 7i < z_DQ));
    let z_q2: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 8i], 8i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 9i], 9i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 10i], 10i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 11i], 11i < z_DQ));
    let z_q3: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 12i], 12i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 13i], 13i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 14i], 14i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 15i], 15i < z_DQ));
    let z_q4: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 16i], 16i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 17i], 17i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 18i], 18i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 19i], 19i < z_DQ));
    let z_q5: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 20i], 20i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 21i], 21i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 22i], 22i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 23i], 23i < z_DQ));
    let z_q6: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 24i], 24i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 25i], 25i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 26i], 26i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 27i], 27i < z_DQ));
    let z_q7: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 28i], 28i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 29i], 29i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 30i], 30i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 31i], 31i < z_DQ));
    let z_q8: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 32i], 32i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 33i], 33i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 34i], 34i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 35i], 35i < z_DQ));
    let z_q9: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 36i], 36i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 37i], 37i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 38i], 38i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 39i], 39i < z_DQ));
    let z_q10: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 40i], 40i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 41i], 41i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 42i], 42i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 43i], 43i < z_DQ));
    let z_q11: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 44i], 44i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 45i], 45i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 46i], 46i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 47i], 47i < z_DQ));
    let z_q12: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 48i], 48i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 49i], 49i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 50i], 50i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 51i], 51i < z_DQ));
    let z_q13: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 52i], 52i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 53i], 53i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 54i], 54i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 55i], 55i < z_DQ));
    let z_q14: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 56i], 56i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 57i], 57i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 58i], 58i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 59i], 59i < z_DQ));
    let z_q15: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 60i], 60i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 61i], 61i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 62i], 62i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 63i], 63i < z_DQ));
    let z_q16: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 64i], 64i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 65i], 65i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 66i], 66i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 67i], 67i < z_DQ));
    let z_q17: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 68i], 68i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 69i], 69i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 70i], 70i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 71i], 71i < z_DQ));
    let z_q18: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 72i], 72i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 73i], 73i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 74i], 74i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 75i], 75i < z_DQ));
    let z_q19: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 76i], 76i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 77i], 77i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 78i], 78i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 79i], 79i < z_DQ));
    let z_q20: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 80i], 80i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 81i], 81i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 82i], 82i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 83i], 83i < z_DQ));
    let z_q21: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 84i], 84i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 85i], 85i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 86i], 86i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 87i], 87i < z_DQ));
    let z_q22: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 88i], 88i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 89i], 89i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 90i], 90i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 91i], 91i < z_DQ));
    let z_q23: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 92i], 92i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 93i], 93i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 94i], 94i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 95i], 95i < z_DQ));
    let z_q24: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 96i], 96i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 97i], 97i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 98i], 98i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 99i], 99i < z_DQ));
    let z_q25: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 100i], 100i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 101i], 101i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 102i], 102i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 103i], 103i < z_DQ));
    let z_q26: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 104i], 104i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 105i], 105i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 106i], 106i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 107i], 107i < z_DQ));
    let z_q27: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 108i], 108i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 109i], 109i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 110i], 110i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 111i], 111i < z_DQ));
    let z_q28: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 112i], 112i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 113i], 113i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 114i], 114i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 115i], 115i < z_DQ));
    let z_q29: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 116i], 116i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 117i], 117i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 118i], 118i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 119i], 119i < z_DQ));
    let z_q30: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 120i], 120i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 121i], 121i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 122i], 122i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 123i], 123i < z_DQ));
    let z_q31: vec4<f32> = vec4<f32>(select(0.0f, Q[(z_qbase) * P.Q_d3 + 124i], 124i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 125i], 125i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 126i], 126i < z_DQ), select(0.0f, Q[(z_qbase) * P.Q_d3 + 127i], 127i < z_DQ));
    var z_m: f32 = bitcast<f32>(0xff800000u);
    var z_l: f32 = 0.0f;
    var z_o0: vec4<f32> = vec4<f32>(0.0f);
    var z_o1: vec4<f32> = vec4<f32>(0.0f);
    var z_o2: vec4<f32> = vec4<f32>(0.0f);
    var z_o3: vec4<f32> = vec4<f32>(0.0f);
    var z_o4: vec4<f32> = vec4<f32>(0.0f);
    var z_o5: vec4<f32> = vec4<f32>(0.0f);
    var z_o6: vec4<f32> = vec4<f32>(0.0f);
    var z_o7: vec4<f32> = vec4<f32>(0.0f);
    var z_o8: vec4<f32> = vec4<f32>(0.0f);
    var z_o9: vec4<f32> = vec4<f32>(0.0f);
    var z_o10: vec4<f32> = vec4<f32>(0.0f);
    var z_o11: vec4<f32> = vec4<f32>(0.0f);
    var z_o12: vec4<f32> = vec4<f32>(0.0f);
    var z_o13: vec4<f32> = vec4<f32>(0.0f);
    var z_o14: vec4<f32> = vec4<f32>(0.0f);
    var z_o15: vec4<f32> = vec4<f32>(0.0f);
    var z_o16: vec4<f32> = vec4<f32>(0.0f);
    var z_o17: vec4<f32> = vec4<f32>(0.0f);
    var z_o18: vec4<f32> = vec4<f32>(0.0f);
    var z_o19: vec4<f32> = vec4<f32>(0.0f);
    var z_o20: vec4<f32> = vec4<f32>(0.0f);
    var z_o21: vec4<f32> = vec4<f32>(0.0f);
    var z_o22: vec4<f32> = vec4<f32>(0.0f);
    var z_o23: vec4<f32> = vec4<f32>(0.0f);
    var z_o24: vec4<f32> = vec4<f32>(0.0f);
    var z_o25: vec4<f32> = vec4<f32>(0.0f);
    var z_o26: vec4<f32> = vec4<f32>(0.0f);
    var z_o27: vec4<f32> = vec4<f32>(0.0f);
    var z_o28: vec4<f32> = vec4<f32>(0.0f);
    var z_o29: vec4<f32> = vec4<f32>(0.0f);
    var z_o30: vec4<f32> = vec4<f32>(0.0f);
    var z_o31: vec4<f32> = vec4<f32>(0.0f);
    for (var z_k0: i32 = 0i; z_k0 < z_S; z_k0 = z_k0 + 8i) {
        // K and V rows z_k0 .. z_k0 + 8 into workgroup memory
        for (var z_e: i32 = z_t; z_e < 256i; z_e = z_e + 64i) {
            let z_row: i32 = z_e / 32i;
            let z_c: i32 = z_e % 32i;
            let z_j: i32 = min(z_k0 + z_row, z_S - 1i);
            var z_kv4: vec4<f32> = vec4<f32>(0.0f);
            var z_vv4: vec4<f32> = vec4<f32>(0.0f);
            for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
                let z_d: i32 = z_c * 4i + z_x;
                z_kv4[z_x] = select(0.0f, K[(z_kbase + z_j) * P.K_d3 + min(z_d, P.K_d3 - 1i)], z_d < z_DQ);
                z_vv4[z_x] = select(0.0f, V[(z_vbase + z_j) * P.V_d3 + min(z_d, P.V_d3 - 1i)], z_d < z_DV);
            }
            z_kv128[z_row * 33i + z_c] = z_kv4;
            z_kv128[264i + z_row * 33i + z_c] = z_vv4;
        }
        workgroupBarrier();
        // scores of keys z_k0 + z_r + 4 * u
        var z_tmax: f32 = bitcast<f32>(0xff800000u);
        let z_jj0: i32 = z_r + 0i;
        let z_j0: i32 = z_k0 + z_jj0;
        let z_dot0: f32 = dot(z_q0, z_kv128[z_jj0 * 33i + 0i]) + dot(z_q1, z_kv128[z_jj0 * 33i + 1i]) + dot(z_q2, z_kv128[z_jj0 * 33i + 2i]) + dot(z_q3, z_kv128[z_jj0 * 33i + 3i]) + dot(z_q4, z_kv128[z_jj0 * 33i + 4i]) + dot(z_q5, z_kv128[z_jj0 * 33i + 5i]) + dot(z_q6, z_kv128[z_jj0 * 33i + 6i]) + dot(z_q7, z_kv128[z_jj0 * 33i + 7i]) + dot(z_q8, z_kv128[z_jj0 * 33i + 8i]) + dot(z_q9, z_kv128[z_jj0 * 33i + 9i]) + dot(z_q10, z_kv128[z_jj0 * 33i + 10i]) + dot(z_q11, z_kv128[z_jj0 * 33i + 11i]) + dot(z_q12, z_kv128[z_jj0 * 33i + 12i]) + dot(z_q13, z_kv128[z_jj0 * 33i + 13i]) + dot(z_q14, z_kv128[z_jj0 * 33i + 14i]) + dot(z_q15, z_kv128[z_jj0 * 33i + 15i]) + dot(z_q16, z_kv128[z_jj0 * 33i + 16i]) + dot(z_q17, z_kv128[z_jj0 * 33i + 17i]) + dot(z_q18, z_kv128[z_jj0 * 33i + 18i]) + dot(z_q19, z_kv128[z_jj0 * 33i + 19i]) + dot(z_q20, z_kv128[z_jj0 * 33i + 20i]) + dot(z_q21, z_kv128[z_jj0 * 33i + 21i]) + dot(z_q22, z_kv128[z_jj0 * 33i + 22i]) + dot(z_q23, z_kv128[z_jj0 * 33i + 23i]) + dot(z_q24, z_kv128[z_jj0 * 33i + 24i]) + dot(z_q25, z_kv128[z_jj0 * 33i + 25i]) + dot(z_q26, z_kv128[z_jj0 * 33i + 26i]) + dot(z_q27, z_kv128[z_jj0 * 33i + 27i]) + dot(z_q28, z_kv128[z_jj0 * 33i + 28i]) + dot(z_q29, z_kv128[z_jj0 * 33i + 29i]) + dot(z_q30, z_kv128[z_jj0 * 33i + 30i]) + dot(z_q31, z_kv128[z_jj0 * 33i + 31i]);
        let z_s0: f32 = select(bitcast<f32>(0xff800000u), (z_dot0 * z_scale), z_qok && z_j0 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j0, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s0);
        let z_jj1: i32 = z_r + 4i;
        let z_j1: i32 = z_k0 + z_jj1;
        let z_dot1: f32 = dot(z_q0, z_kv128[z_jj1 * 33i + 0i]) + dot(z_q1, z_kv128[z_jj1 * 33i + 1i]) + dot(z_q2, z_kv128[z_jj1 * 33i + 2i]) + dot(z_q3, z_kv128[z_jj1 * 33i + 3i]) + dot(z_q4, z_kv128[z_jj1 * 33i + 4i]) + dot(z_q5, z_kv128[z_jj1 * 33i + 5i]) + dot(z_q6, z_kv128[z_jj1 * 33i + 6i]) + dot(z_q7, z_kv128[z_jj1 * 33i + 7i]) + dot(z_q8, z_kv128[z_jj1 * 33i + 8i]) + dot(z_q9, z_kv128[z_jj1 * 33i + 9i]) + dot(z_q10, z_kv128[z_jj1 * 33i + 10i]) + dot(z_q11, z_kv128[z_jj1 * 33i + 11i]) + dot(z_q12, z_kv128[z_jj1 * 33i + 12i]) + dot(z_q13, z_kv128[z_jj1 * 33i + 13i]) + dot(z_q14, z_kv128[z_jj1 * 33i + 14i]) + dot(z_q15, z_kv128[z_jj1 * 33i + 15i]) + dot(z_q16, z_kv128[z_jj1 * 33i + 16i]) + dot(z_q17, z_kv128[z_jj1 * 33i + 17i]) + dot(z_q18, z_kv128[z_jj1 * 33i + 18i]) + dot(z_q19, z_kv128[z_jj1 * 33i + 19i]) + dot(z_q20, z_kv128[z_jj1 * 33i + 20i]) + dot(z_q21, z_kv128[z_jj1 * 33i + 21i]) + dot(z_q22, z_kv128[z_jj1 * 33i + 22i]) + dot(z_q23, z_kv128[z_jj1 * 33i + 23i]) + dot(z_q24, z_kv128[z_jj1 * 33i + 24i]) + dot(z_q25, z_kv128[z_jj1 * 33i + 25i]) + dot(z_q26, z_kv128[z_jj1 * 33i + 26i]) + dot(z_q27, z_kv128[z_jj1 * 33i + 27i]) + dot(z_q28, z_kv128[z_jj1 * 33i + 28i]) + dot(z_q29, z_kv128[z_jj1 * 33i + 29i]) + dot(z_q30, z_kv128[z_jj1 * 33i + 30i]) + dot(z_q31, z_kv128[z_jj1 * 33i + 31i]);
        let z_s1: f32 = select(bitcast<f32>(0xff800000u), (z_dot1 * z_scale), z_qok && z_j1 < z_S && (mask[(z_chk(z_i, P.mask_d0, 1i)) * P.mask_d1 + z_chk(z_j1, P.mask_d1, 2i)] != 0u));
        z_tmax = max(z_tmax, z_s1);
        let z_mnew: f32 = max(z_m, z_tmax);
        if (!(z_mnew <= bitcast<f32>(0xff800000u))) {
            let z_alpha: f32 = select(0.0f, exp(z_m - z_mnew), !(z_m <= bitcast<f32>(0xff800000u)));
            z_l = z_l * z_alpha;
            z_o0 = z_o0 * z_alpha;
            z_o1 = z_o1 * z_alpha;
            z_o2 = z_o2 * z_alpha;
            z_o3 = z_o3 * z_alpha;
            z_o4 = z_o4 * z_alpha;
            z_o5 = z_o5 * z_alpha;
            z_o6 = z_o6 * z_alpha;
            z_o7 = z_o7 * z_alpha;
            z_o8 = z_o8 * z_alpha;
            z_o9 = z_o9 * z_alpha;
            z_o10 = z_o10 * z_alpha;
            z_o11 = z_o11 * z_alpha;
            z_o12 = z_o12 * z_alpha;
            z_o13 = z_o13 * z_alpha;
            z_o14 = z_o14 * z_alpha;
            z_o15 = z_o15 * z_alpha;
            z_o16 = z_o16 * z_alpha;
            z_o17 = z_o17 * z_alpha;
            z_o18 = z_o18 * z_alpha;
            z_o19 = z_o19 * z_alpha;
            z_o20 = z_o20 * z_alpha;
            z_o21 = z_o21 * z_alpha;
            z_o22 = z_o22 * z_alpha;
            z_o23 = z_o23 * z_alpha;
            z_o24 = z_o24 * z_alpha;
            z_o25 = z_o25 * z_alpha;
            z_o26 = z_o26 * z_alpha;
            z_o27 = z_o27 * z_alpha;
            z_o28 = z_o28 * z_alpha;
            z_o29 = z_o29 * z_alpha;
            z_o30 = z_o30 * z_alpha;
            z_o31 = z_o31 * z_alpha;
            let z_p0: f32 = select(0.0f, exp(z_s0 - z_mnew), !(z_s0 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p0;
            z_o0 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 7i], z_o7);
            z_o8 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 8i], z_o8);
            z_o9 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 9i], z_o9);
            z_o10 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 10i], z_o10);
            z_o11 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 11i], z_o11);
            z_o12 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 12i], z_o12);
            z_o13 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 13i], z_o13);
            z_o14 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 14i], z_o14);
            z_o15 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 15i], z_o15);
            z_o16 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 16i], z_o16);
            z_o17 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 17i], z_o17);
            z_o18 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 18i], z_o18);
            z_o19 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 19i], z_o19);
            z_o20 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 20i], z_o20);
            z_o21 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 21i], z_o21);
            z_o22 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 22i], z_o22);
            z_o23 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 23i], z_o23);
            z_o24 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 24i], z_o24);
            z_o25 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 25i], z_o25);
            z_o26 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 26i], z_o26);
            z_o27 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 27i], z_o27);
            z_o28 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 28i], z_o28);
            z_o29 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 29i], z_o29);
            z_o30 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 30i], z_o30);
            z_o31 = fma(vec4<f32>(z_p0), z_kv128[264i + z_jj0 * 33i + 31i], z_o31);
            let z_p1: f32 = select(0.0f, exp(z_s1 - z_mnew), !(z_s1 <= bitcast<f32>(0xff800000u)));
            z_l = z_l + z_p1;
            z_o0 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 0i], z_o0);
            z_o1 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 1i], z_o1);
            z_o2 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 2i], z_o2);
            z_o3 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 3i], z_o3);
            z_o4 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 4i], z_o4);
            z_o5 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 5i], z_o5);
            z_o6 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 6i], z_o6);
            z_o7 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 7i], z_o7);
            z_o8 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 8i], z_o8);
            z_o9 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 9i], z_o9);
            z_o10 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 10i], z_o10);
            z_o11 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 11i], z_o11);
            z_o12 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 12i], z_o12);
            z_o13 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 13i], z_o13);
            z_o14 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 14i], z_o14);
            z_o15 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 15i], z_o15);
            z_o16 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 16i], z_o16);
            z_o17 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 17i], z_o17);
            z_o18 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 18i], z_o18);
            z_o19 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 19i], z_o19);
            z_o20 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 20i], z_o20);
            z_o21 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 21i], z_o21);
            z_o22 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 22i], z_o22);
            z_o23 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 23i], z_o23);
            z_o24 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 24i], z_o24);
            z_o25 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 25i], z_o25);
            z_o26 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 26i], z_o26);
            z_o27 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 27i], z_o27);
            z_o28 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 28i], z_o28);
            z_o29 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 29i], z_o29);
            z_o30 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 30i], z_o30);
            z_o31 = fma(vec4<f32>(z_p1), z_kv128[264i + z_jj1 * 33i + 31i], z_o31);
            z_m = z_mnew;
        }
        workgroupBarrier();
    }
    // merge the 4 lanes of each query
    z_ml128[z_t] = z_m;
    z_ml128[64i + z_t] = z_l;
    workgroupBarrier();
    var z_M: f32 = bitcast<f32>(0xff800000u);
    for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
        z_M = max(z_M, z_ml128[z_q * 4i + z_x]);
    }
    var z_L: f32 = 0.0f;
    for (var z_x: i32 = 0i; z_x < 4i; z_x = z_x + 1i) {
        let z_mx: f32 = z_ml128[z_q * 4i + z_x];
        z_L = z_L + select(0.0f, z_ml128[64i + z_q * 4i + z_x] * exp(z_mx - z_M), !(z_mx <= bitcast<f32>(0xff800000u)));
    }
    let z_f: f32 = select(0.0f, exp(z_m - z_M), !(z_m <= bitcast<f32>(0xff800000u)));
    z_o0 = z_o0 * z_f;
    z_o1 = z_o1 * z_f;
    z_o2 = z_o2 * z_f;
    z_o3 = z_o3 * z_f;
    z_o4 = z_o4 * z_f;
    z_o5 = z_o5 * z_f;
    z_o6 = z_o6 * z_f;
    z_o7 = z_o7 * z_f;
    z_o8 = z_o8 * z_f;
    z_o9 = z_o9 * z_f;
    z_o10 = z_o10 * z_f;
    z_o11 = z_o11 * z_f;
    z_o12 = z_o12 * z_f;
    z_o13 = z_o13 * z_f;
    z_o14 = z_o14 * z_f;
    z_o15 = z_o15 * z_f;
    z_o16 = z_o16 * z_f;
    z_o17 = z_o17 * z_f;
    z_o18 = z_o18 * z_f;
    z_o19 = z_o19 * z_f;
    z_o20 = z_o20 * z_f;
    z_o21 = z_o21 * z_f;
    z_o22 = z_o22 * z_f;
    z_o23 = z_o23 * z_f;
    z_o24 = z_o24 * z_f;
    z_o25 = z_o25 * z_f;
    z_o26 = z_o26 * z_f;
    z_o27 = z_o27 * z_f;
    z_o28 = z_o28 * z_f;
    z_o29 = z_o29 * z_f;
    z_o30 = z_o30 * z_f;
    z_o31 = z_o31 * z_f;
    for (var z_x: i32 = 1i; z_x < 4i; z_x = z_x + 1i) {
        if (z_r == z_x) {
            z_kv128[z_q * 32i + 0i] = z_o0;
            z_kv128[z_q * 32i + 1i] = z_o1;
            z_kv128[z_q * 32i + 2i] = z_o2;
            z_kv128[z_q * 32i + 3i] = z_o3;
            z_kv128[z_q * 32i + 4i] = z_o4;
            z_kv128[z_q * 32i + 5i] = z_o5;
            z_kv128[z_q * 32i + 6i] = z_o6;
            z_kv128[z_q * 32i + 7i] = z_o7;
            z_kv128[z_q * 32i + 8i] = z_o8;
            z_kv128[z_q * 32i + 9i] = z_o9;
            z_kv128[z_q * 32i + 10i] = z_o10;
            z_kv128[z_q * 32i + 11i] = z_o11;
            z_kv128[z_q * 32i + 12i] = z_o12;
            z_kv128[z_q * 32i + 13i] = z_o13;
            z_kv128[z_q * 32i + 14i] = z_o14;
            z_kv128[z_q * 32i + 15i] = z_o15;
            z_kv128[z_q * 32i + 16i] = z_o16;
            z_kv128[z_q * 32i + 17i] = z_o17;
            z_kv128[z_q * 32i + 18i] = z_o18;
            z_kv128[z_q * 32i + 19i] = z_o19;
            z_kv128[z_q * 32i + 20i] = z_o20;
            z_kv128[z_q * 32i + 21i] = z_o21;
            z_kv128[z_q * 32i + 22i] = z_o22;
            z_kv128[z_q * 32i + 23i] = z_o23;
            z_kv128[z_q * 32i + 24i] = z_o24;
            z_kv128[z_q * 32i + 25i] = z_o25;
            z_kv128[z_q * 32i + 26i] = z_o26;
            z_kv128[z_q * 32i + 27i] = z_o27;
            z_kv128[z_q * 32i + 28i] = z_o28;
            z_kv128[z_q * 32i + 29i] = z_o29;
            z_kv128[z_q * 32i + 30i] = z_o30;
            z_kv128[z_q * 32i + 31i] = z_o31;
        }
        workgroupBarrier();
        if (z_r == 0i) {
            z_o0 = z_o0 + z_kv128[z_q * 32i + 0i];
            z_o1 = z_o1 + z_kv128[z_q * 32i + 1i];
            z_o2 = z_o2 + z_kv128[z_q * 32i + 2i];
            z_o3 = z_o3 + z_kv128[z_q * 32i + 3i];
            z_o4 = z_o4 + z_kv128[z_q * 32i + 4i];
            z_o5 = z_o5 + z_kv128[z_q * 32i + 5i];
            z_o6 = z_o6 + z_kv128[z_q * 32i + 6i];
            z_o7 = z_o7 + z_kv128[z_q * 32i + 7i];
            z_o8 = z_o8 + z_kv128[z_q * 32i + 8i];
            z_o9 = z_o9 + z_kv128[z_q * 32i + 9i];
            z_o10 = z_o10 + z_kv128[z_q * 32i + 10i];
            z_o11 = z_o11 + z_kv128[z_q * 32i + 11i];
            z_o12 = z_o12 + z_kv128[z_q * 32i + 12i];
            z_o13 = z_o13 + z_kv128[z_q * 32i + 13i];
            z_o14 = z_o14 + z_kv128[z_q * 32i + 14i];
            z_o15 = z_o15 + z_kv128[z_q * 32i + 15i];
            z_o16 = z_o16 + z_kv128[z_q * 32i + 16i];
            z_o17 = z_o17 + z_kv128[z_q * 32i + 17i];
            z_o18 = z_o18 + z_kv128[z_q * 32i + 18i];
            z_o19 = z_o19 + z_kv128[z_q * 32i + 19i];
            z_o20 = z_o20 + z_kv128[z_q * 32i + 20i];
            z_o21 = z_o21 + z_kv128[z_q * 32i + 21i];
            z_o22 = z_o22 + z_kv128[z_q * 32i + 22i];
            z_o23 = z_o23 + z_kv128[z_q * 32i + 23i];
            z_o24 = z_o24 + z_kv128[z_q * 32i + 24i];
            z_o25 = z_o25 + z_kv128[z_q * 32i + 25i];
            z_o26 = z_o26 + z_kv128[z_q * 32i + 26i];
            z_o27 = z_o27 + z_kv128[z_q * 32i + 27i];
            z_o28 = z_o28 + z_kv128[z_q * 32i + 28i];
            z_o29 = z_o29 + z_kv128[z_q * 32i + 29i];
            z_o30 = z_o30 + z_kv128[z_q * 32i + 30i];
            z_o31 = z_o31 + z_kv128[z_q * 32i + 31i];
        }
        workgroupBarrier();
    }
    if (z_r == 0i && z_qok) {
        let z_obase: i32 = (z_b * P.out_d1 * P.out_d2 + z_h * P.out_d2 + z_i) * P.out_d3;
        let z_inv: f32 = select(0.0f, 1.0f / z_L, z_L > 0.0f);
        if (0i < z_DV) { out[z_obase + 0i] = z_o0[0] * z_inv; }
        if (1i < z_DV) { out[z_obase + 1i] = z_o0[1] * z_inv; }
        if (2i < z_DV) { out[z_obase + 2i] = z_o0[2] * z_inv; }
        if (3i < z_DV) { out[z_obase + 3i] = z_o0[3] * z_inv; }
        if (4i < z_DV) { out[z_obase + 4i] = z_o1[0] * z_inv; }
        if (5i < z_DV) { out[z_obase + 5i] = z_o1[1] * z_inv; }
        if (6i < z_DV) { out[z_obase + 6i] = z_o1[2] * z_inv; }
        if (7i < z_DV) { out[z_obase + 7i] = z_o1[3] * z_inv; }
        if (8i < z_DV) { out[z_obase + 8i] = z_o2[0] * z_inv; }
        if (9i < z_DV) { out[z_obase + 9i] = z_o2[1] * z_inv; }
        if (10i < z_DV) { out[z_obase + 10i] = z_o2[2] * z_inv; }
        if (11i < z_DV) { out[z_obase + 11i] = z_o2[3] * z_inv; }
        if (12i < z_DV) { out[z_obase + 12i] = z_o3[0] * z_inv; }
        if (13i < z_DV) { out[z_obase + 13i] = z_o3[1] * z_inv; }
        if (14i < z_DV) { out[z_obase + 14i] = z_o3[2] * z_inv; }
        if (15i < z_DV) { out[z_obase + 15i] = z_o3[3] * z_inv; }
        if (16i < z_DV) { out[z_obase + 16i] = z_o4[0] * z_inv; }
        if (17i < z_DV) { out[z_obase + 17i] = z_o4[1] * z_inv; }
        if (18i < z_DV) { out[z_obase + 18i] = z_o4[2] * z_inv; }
        if (19i < z_DV) { out[z_obase + 19i] = z_o4[3] * z_inv; }
        if (20i < z_DV) { out[z_obase + 20i] = z_o5[0] * z_inv; }
        if (21i < z_DV) { out[z_obase + 21i] = z_o5[1] * z_inv; }
        if (22i < z_DV) { out[z_obase + 22i] = z_o5[2] * z_inv; }
        if (23i < z_DV) { out[z_obase + 23i] = z_o5[3] * z_inv; }
        if (24i < z_DV) { out[z_obase + 24i] = z_o6[0] * z_inv; }
        if (25i < z_DV) { out[z_obase + 25i] = z_o6[1] * z_inv; }
        if (26i < z_DV) { out[z_obase + 26i] = z_o6[2] * z_inv; }
        if (27i < z_DV) { out[z_obase + 27i] = z_o6[3] * z_inv; }
        if (28i < z_DV) { out[z_obase + 28i] = z_o7[0] * z_inv; }
        if (29i < z_DV) { out[z_obase + 29i] = z_o7[1] * z_inv; }
        if (30i < z_DV) { out[z_obase + 30i] = z_o7[2] * z_inv; }
        if (31i < z_DV) { out[z_obase + 31i] = z_o7[3] * z_inv; }
        if (32i < z_DV) { out[z_obase + 32i] = z_o8[0] * z_inv; }
        if (33i < z_DV) { out[z_obase + 33i] = z_o8[1] * z_inv; }
        if (34i < z_DV) { out[z_obase + 34i] = z_o8[2] * z_inv; }
        if (35i < z_DV) { out[z_obase + 35i] = z_o8[3] * z_inv; }
        if (36i < z_DV) { out[z_obase + 36i] = z_o9[0] * z_inv; }
        if (37i < z_DV) { out[z_obase + 37i] = z_o9[1] * z_inv; }
        if (38i < z_DV) { out[z_obase + 38i] = z_o9[2] * z_inv; }
        if (39i < z_DV) { out[z_obase + 39i] = z_o9[3] * z_inv; }
        if (40i < z_DV) { out[z_obase + 40i] = z_o10[0] * z_inv; }
        if (41i < z_DV) { out[z_obase + 41i] = z_o10[1] * z_inv; }
        if (42i < z_DV) { out[z_obase + 42i] = z_o10[2] * z_inv; }
        if (43i < z_DV) { out[z_obase + 43i] = z_o10[3] * z_inv; }
        if (44i < z_DV) { out[z_obase + 44i] = z_o11[0] * z_inv; }
        if (45i < z_DV) { out[z_obase + 45i] = z_o11[1] * z_inv; }
        if (46i < z_DV) { out[z_obase + 46i] = z_o11[2] * z_inv; }
        if (47i < z_DV) { out[z_obase + 47i] = z_o11[3] * z_inv; }
        if (48i < z_DV) { out[z_obase + 48i] = z_o12[0] * z_inv; }
        if (49i < z_DV) { out[z_obase + 49i] = z_o12[1] * z_inv; }
        if (50i < z_DV) { out[z_obase + 50i] = z_o12[2] * z_inv; }
        if (51i < z_DV) { out[z_obase + 51i] = z_o12[3] * z_inv; }
        if (52i < z_DV) { out[z_obase + 52i] = z_o13[0] * z_inv; }
        if (53i < z_DV) { out[z_obase + 53i] = z_o13[1] * z_inv; }
        if (54i < z_DV) { out[z_obase + 54i] = z_o13[2] * z_inv; }
        if (55i < z_DV) { out[z_obase + 55i] = z_o13[3] * z_inv; }
        if (56i < z_DV) { out[z_obase + 56i] = z_o14[0] * z_inv; }
        if (57i < z_DV) { out[z_obase + 57i] = z_o14[1] * z_inv; }
        if (58i < z_DV) { out[z_obase + 58i] = z_o14[2] * z_inv; }
        if (59i < z_DV) { out[z_obase + 59i] = z_o14[3] * z_inv; }
        if (60i < z_DV) { out[z_obase + 60i] = z_o15[0] * z_inv; }
        if (61i < z_DV) { out[z_obase + 61i] = z_o15[1] * z_inv; }
        if (62i < z_DV) { out[z_obase + 62i] = z_o15[2] * z_inv; }
        if (63i < z_DV) { out[z_obase + 63i] = z_o15[3] * z_inv; }
        if (64i < z_DV) { out[z_obase + 64i] = z_o16[0] * z_inv; }
        if (65i < z_DV) { out[z_obase + 65i] = z_o16[1] * z_inv; }
        if (66i < z_DV) { out[z_obase + 66i] = z_o16[2] * z_inv; }
        if (67i < z_DV) { out[z_obase + 67i] = z_o16[3] * z_inv; }
        if (68i < z_DV) { out[z_obase + 68i] = z_o17[0] * z_inv; }
        if (69i < z_DV) { out[z_obase + 69i] = z_o17[1] * z_inv; }
        if (70i < z_DV) { out[z_obase + 70i] = z_o17[2] * z_inv; }
        if (71i < z_DV) { out[z_obase + 71i] = z_o17[3] * z_inv; }
        if (72i < z_DV) { out[z_obase + 72i] = z_o18[0] * z_inv; }
        if (73i < z_DV) { out[z_obase + 73i] = z_o18[1] * z_inv; }
        if (74i < z_DV) { out[z_obase + 74i] = z_o18[2] * z_inv; }
        if (75i < z_DV) { out[z_obase + 75i] = z_o18[3] * z_inv; }
        if (76i < z_DV) { out[z_obase + 76i] = z_o19[0] * z_inv; }
        if (77i < z_DV) { out[z_obase + 77i] = z_o19[1] * z_inv; }
        if (78i < z_DV) { out[z_obase + 78i] = z_o19[2] * z_inv; }
        if (79i < z_DV) { out[z_obase + 79i] = z_o19[3] * z_inv; }
        if (80i < z_DV) { out[z_obase + 80i] = z_o20[0] * z_inv; }
        if (81i < z_DV) { out[z_obase + 81i] = z_o20[1] * z_inv; }
        if (82i < z_DV) { out[z_obase + 82i] = z_o20[2] * z_inv; }
        if (83i < z_DV) { out[z_obase + 83i] = z_o20[3] * z_inv; }
        if (84i < z_DV) { out[z_obase + 84i] = z_o21[0] * z_inv; }
        if (85i < z_DV) { out[z_obase + 85i] = z_o21[1] * z_inv; }
        if (86i < z_DV) { out[z_obase + 86i] = z_o21[2] * z_inv; }
        if (87i < z_DV) { out[z_obase + 87i] = z_o21[3] * z_inv; }
        if (88i < z_DV) { out[z_obase + 88i] = z_o22[0] * z_inv; }
        if (89i < z_DV) { out[z_obase + 89i] = z_o22[1] * z_inv; }
        if (90i < z_DV) { out[z_obase + 90i] = z_o22[2] * z_inv; }
        if (91i < z_DV) { out[z_obase + 91i] = z_o22[3] * z_inv; }
        if (92i < z_DV) { out[z_obase + 92i] = z_o23[0] * z_inv; }
        if (93i < z_DV) { out[z_obase + 93i] = z_o23[1] * z_inv; }
        if (94i < z_DV) { out[z_obase + 94i] = z_o23[2] * z_inv; }
        if (95i < z_DV) { out[z_obase + 95i] = z_o23[3] * z_inv; }
        if (96i < z_DV) { out[z_obase + 96i] = z_o24[0] * z_inv; }
        if (97i < z_DV) { out[z_obase + 97i] = z_o24[1] * z_inv; }
        if (98i < z_DV) { out[z_obase + 98i] = z_o24[2] * z_inv; }
        if (99i < z_DV) { out[z_obase + 99i] = z_o24[3] * z_inv; }
        if (100i < z_DV) { out[z_obase + 100i] = z_o25[0] * z_inv; }
        if (101i < z_DV) { out[z_obase + 101i] = z_o25[1] * z_inv; }
        if (102i < z_DV) { out[z_obase + 102i] = z_o25[2] * z_inv; }
        if (103i < z_DV) { out[z_obase + 103i] = z_o25[3] * z_inv; }
        if (104i < z_DV) { out[z_obase + 104i] = z_o26[0] * z_inv; }
        if (105i < z_DV) { out[z_obase + 105i] = z_o26[1] * z_inv; }
        if (106i < z_DV) { out[z_obase + 106i] = z_o26[2] * z_inv; }
        if (107i < z_DV) { out[z_obase + 107i] = z_o26[3] * z_inv; }
        if (108i < z_DV) { out[z_obase + 108i] = z_o27[0] * z_inv; }
        if (109i < z_DV) { out[z_obase + 109i] = z_o27[1] * z_inv; }
        if (110i < z_DV) { out[z_obase + 110i] = z_o27[2] * z_inv; }
        if (111i < z_DV) { out[z_obase + 111i] = z_o27[3] * z_inv; }
        if (112i < z_DV) { out[z_obase + 112i] = z_o28[0] * z_inv; }
        if (113i < z_DV) { out[z_obase + 113i] = z_o28[1] * z_inv; }
        if (114i < z_DV) { out[z_obase + 114i] = z_o28[2] * z_inv; }
        if (115i < z_DV) { out[z_obase + 115i] = z_o28[3] * z_inv; }
        if (116i < z_DV) { out[z_obase + 116i] = z_o29[0] * z_inv; }
        if (117i < z_DV) { out[z_obase + 117i] = z_o29[1] * z_inv; }
        if (118i < z_DV) { out[z_obase + 118i] = z_o29[2] * z_inv; }
        if (119i < z_DV) { out[z_obase + 119i] = z_o29[3] * z_inv; }
        if (120i < z_DV) { out[z_obase + 120i] = z_o30[0] * z_inv; }
        if (121i < z_DV) { out[z_obase + 121i] = z_o30[1] * z_inv; }
        if (122i < z_DV) { out[z_obase + 122i] = z_o30[2] * z_inv; }
        if (123i < z_DV) { out[z_obase + 123i] = z_o30[3] * z_inv; }
        if (124i < z_DV) { out[z_obase + 124i] = z_o31[0] * z_inv; }
        if (125i < z_DV) { out[z_obase + 125i] = z_o31[1] * z_inv; }
        if (126i < z_DV) { out[z_obase + 126i] = z_o31[2] * z_inv; }
        if (127i < z_DV) { out[z_obase + 127i] = z_o31[3] * z_inv; }
    }
}
