// ZynBook WGSL for kernel `flash_attention` (flash attention: 4 threads per query, K/V tiles in shared memory, online softmax in registers, the lanes merged in shared memory (head_dim up to 32: 32 queries x 16-key tiles, 4 keys per step; head_dim up to 64: 32 queries x 16-key tiles, 4 keys per step; head_dim up to 128: 16 queries x 8-key tiles, 2 keys per step) (attention: block_q=32, block_kv=16, lanes=4, chunk=4, tiles=True, products=False))

struct ZynParams {
    u_K_d0: i32,
    u_K_d1: i32,
    u_K_d2: i32,
    u_K_d3: i32,
    u_Q_d0: i32,
    u_Q_d1: i32,
    u_Q_d2: i32,
    u_Q_d3: i32,
    u_V_d0: i32,
    u_V_d1: i32,
    u_V_d2: i32,
    u_V_d3: i32,
    u_batch: i32,
    u_head_dim: i32,
    u_heads: i32,
    u_seq_len: i32,
}

@group(0) @binding(0) var<storage, read> u_Q: array<f32>;
@group(0) @binding(1) var<storage, read> u_K: array<f32>;
@group(0) @binding(2) var<storage, read> u_V: array<f32>;
@group(0) @binding(3) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(4) var<storage, read_write> zyn_err: array<atomic<i32>>;
@group(0) @binding(5) var<uniform> zyn_p: ZynParams;

var<workgroup> _kv: array<vec4<f32>, 544>;
var<workgroup> _ml: array<f32, 256>;
var<workgroup> _fk: array<i32, 256>;

// signed division and remainder truncating as C, through unsigned ones
fn zyn_tdiv(a: i32, b: i32) -> i32 {
    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));
    return select(q, -q, (a < 0i) != (b < 0i)); }
fn zyn_trem(a: i32, b: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(abs(a)) % bitcast<u32>(abs(b)));
    return select(r, -r, a < 0i); }
// on the bits: a shader compiler may assume x == x
fn zyn_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// max and min are numpy's maximum and minimum: NaN propagates, and of equal values the
// second (max(0.0, -0.0) is -0.0); each case its own select, or a shader compiler takes
// the first for its own max, which may give either zero and drop a NaN (OpenGL's did)
fn zyn_max_f32(a: f32, b: f32) -> f32 {
    let r = select(select(b, a, a > b), b, a == b);
    return select(select(r, b, zyn_isnan_f32(b)), a, zyn_isnan_f32(a)); }
fn zyn_exp_f32(x: f32) -> f32 {
    // the builtin's error grows with |x| (3 + 2 |x| ulp: exp(-79.3) was off by 3.7e-6 of
    // itself): Cody-Waite's reduction to |r| <= ln 2 / 2, Cephes' expf polynomial, 2^n
    if (!(x > -104.0f && x < 88.8f)) { return exp(x); }  // NaN, infinities, 0 and inf
    let n = floor(x * 1.44269504088896341f + 0.5f);
    let r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    let y = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r
        + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * r * r + r + 1.0f;
    // times 2^n by adding n to y's exponent bits (y in [0.7, 1.42]: exact while the result
    // is normal, and no float product a driver could reorder or flush; two ldexp calls made
    // the WebGPU softmax on an H200 twice as slow); below (n from -150, a subnormal result,
    // which llvmpipe's builtin flushed to 0, as it did exp(-86.99)) as 2^-63 * 2^(n + 63)
    // (n = 128: 2^127, then times 2, overflowing as it should)
    let m = min(n, 127.0f);
    if (n >= -125.0f) { return bitcast<f32>(bitcast<i32>(y) + (i32(m) << 23u)) * select(1.0f, 2.0f, n > m); }
    return y * 1.0842021724855044e-19f * bitcast<f32>(u32(i32(n) + 190i) << 23u); }
// the error flag (zynbook/compiler/errflag.py): the first failing site and its value win
fn zyn_fail(site: i32, v: i32) {
    loop {
        let r = atomicCompareExchangeWeak(&zyn_err[0], 0i, site);
        if (r.exchanged) { atomicStore(&zyn_err[1], v); break; }
        if (r.old_value != 0i) { break; }
    }
}
fn zyn_in(i: i32, n: i32, site: i32) -> bool {
    if (i < 0i || i >= n) { zyn_fail(site, i); return false; } return true; }

// attention, head_dim up to 32: 32 queries per block, 4 threads each
@compute @workgroup_size(128)
fn zyn_k_flash_attention_d32(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_K_d0: i32 = zyn_p.u_K_d0;
    let u_K_d1: i32 = zyn_p.u_K_d1;
    let u_K_d2: i32 = zyn_p.u_K_d2;
    let u_K_d3: i32 = zyn_p.u_K_d3;
    let u_Q_d0: i32 = zyn_p.u_Q_d0;
    let u_Q_d1: i32 = zyn_p.u_Q_d1;
    let u_Q_d2: i32 = zyn_p.u_Q_d2;
    let u_Q_d3: i32 = zyn_p.u_Q_d3;
    let u_V_d0: i32 = zyn_p.u_V_d0;
    let u_V_d1: i32 = zyn_p.u_V_d1;
    let u_V_d2: i32 = zyn_p.u_V_d2;
    let u_V_d3: i32 = zyn_p.u_V_d3;
    let u_batch: i32 = zyn_p.u_batch;
    let u_head_dim: i32 = zyn_p.u_head_dim;
    let u_heads: i32 = zyn_p.u_heads;
    let u_seq_len: i32 = zyn_p.u_seq_len;
    // _kv: workgroup memory, declared above
    // _ml: workgroup memory, declared above
    // _fk: workgroup memory, declared above
    let _S: i32 = u_seq_len;
    let _SK: i32 = u_seq_len;
    let _nqb: i32 = zyn_tdiv((u_seq_len + 31i), 32i);
    let _bh: i32 = zyn_tdiv(zyn_block, _nqb);
    let _h: i32 = zyn_trem(_bh, u_heads);
    let _b: i32 = zyn_tdiv(_bh, u_heads);
    let _t: i32 = zyn_thread;
    let _q: i32 = zyn_tdiv(_t, 4i);
    let _r: i32 = zyn_trem(_t, 4i);
    let _qi: i32 = ((zyn_trem(zyn_block, _nqb) * 32i) + _q);
    let _qc: i32 = min(_qi, (_S - 1i));
    let _qrow: i32 = (((((_b * u_Q_d1) * u_Q_d2) * u_Q_d3) + ((_h * u_Q_d2) * u_Q_d3)) + (_qc * u_Q_d3));
    let _kbase: i32 = ((((_b * u_K_d1) * u_K_d2) * u_K_d3) + ((_h * u_K_d2) * u_K_d3));
    let _vbase: i32 = ((((_b * u_V_d1) * u_V_d2) * u_V_d3) + ((_h * u_V_d2) * u_V_d3));
    let _orow: i32 = (((((_b * u_heads) * u_seq_len) * u_head_dim) + ((_h * u_seq_len) * u_head_dim)) + (_qc * u_head_dim));
    let _scale: f32 = (1.0f / sqrt(f32(u_head_dim)));
    var _qr_0: vec4<f32>;
    var _qr_1: vec4<f32>;
    var _qr_2: vec4<f32>;
    var _qr_3: vec4<f32>;
    var _qr_4: vec4<f32>;
    var _qr_5: vec4<f32>;
    var _qr_6: vec4<f32>;
    var _qr_7: vec4<f32>;
    var _o_0: vec4<f32>;
    var _o_1: vec4<f32>;
    var _o_2: vec4<f32>;
    var _o_3: vec4<f32>;
    var _o_4: vec4<f32>;
    var _o_5: vec4<f32>;
    var _o_6: vec4<f32>;
    var _o_7: vec4<f32>;
    {
        _qr_0 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(0i, (u_Q_d3 - 1i)))], (0i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(1i, (u_Q_d3 - 1i)))], (1i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(2i, (u_Q_d3 - 1i)))], (2i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(3i, (u_Q_d3 - 1i)))], (3i < u_Q_d3))) * vec4<f32>(_scale));
        _o_0 = vec4<f32>(0.0f);
        _qr_1 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(4i, (u_Q_d3 - 1i)))], (4i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(5i, (u_Q_d3 - 1i)))], (5i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(6i, (u_Q_d3 - 1i)))], (6i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(7i, (u_Q_d3 - 1i)))], (7i < u_Q_d3))) * vec4<f32>(_scale));
        _o_1 = vec4<f32>(0.0f);
        _qr_2 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(8i, (u_Q_d3 - 1i)))], (8i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(9i, (u_Q_d3 - 1i)))], (9i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(10i, (u_Q_d3 - 1i)))], (10i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(11i, (u_Q_d3 - 1i)))], (11i < u_Q_d3))) * vec4<f32>(_scale));
        _o_2 = vec4<f32>(0.0f);
        _qr_3 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(12i, (u_Q_d3 - 1i)))], (12i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(13i, (u_Q_d3 - 1i)))], (13i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(14i, (u_Q_d3 - 1i)))], (14i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(15i, (u_Q_d3 - 1i)))], (15i < u_Q_d3))) * vec4<f32>(_scale));
        _o_3 = vec4<f32>(0.0f);
        _qr_4 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(16i, (u_Q_d3 - 1i)))], (16i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(17i, (u_Q_d3 - 1i)))], (17i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(18i, (u_Q_d3 - 1i)))], (18i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(19i, (u_Q_d3 - 1i)))], (19i < u_Q_d3))) * vec4<f32>(_scale));
        _o_4 = vec4<f32>(0.0f);
        _qr_5 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(20i, (u_Q_d3 - 1i)))], (20i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(21i, (u_Q_d3 - 1i)))], (21i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(22i, (u_Q_d3 - 1i)))], (22i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(23i, (u_Q_d3 - 1i)))], (23i < u_Q_d3))) * vec4<f32>(_scale));
        _o_5 = vec4<f32>(0.0f);
        _qr_6 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(24i, (u_Q_d3 - 1i)))], (24i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(25i, (u_Q_d3 - 1i)))], (25i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(26i, (u_Q_d3 - 1i)))], (26i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(27i, (u_Q_d3 - 1i)))], (27i < u_Q_d3))) * vec4<f32>(_scale));
        _o_6 = vec4<f32>(0.0f);
        _qr_7 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(28i, (u_Q_d3 - 1i)))], (28i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(29i, (u_Q_d3 - 1i)))], (29i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(30i, (u_Q_d3 - 1i)))], (30i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(31i, (u_Q_d3 - 1i)))], (31i < u_Q_d3))) * vec4<f32>(_scale));
        _o_7 = vec4<f32>(0.0f);
    }
    var _m: f32 = bitcast<f32>(0xff800000u);
    var _l: f32 = 0.0f;
    var _fa: i32 = _SK;
    var _fn: i32 = _SK;
    for (var _k0: i32 = 0i; _k0 < _SK; _k0 += 16i) {
        workgroupBarrier();
        for (var _e: i32 = _t; _e < 128i; _e += 128i) {
            let _row: i32 = zyn_tdiv(_e, 8i);
            let _col: i32 = zyn_trem(_e, 8i);
            let _jf: i32 = min((_k0 + _row), (_SK - 1i));
            if ((((_col * 4i) + 3i) < u_Q_d3)) {
                _kv[((_row * 9i) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(u_K[((_kbase + (_jf * u_K_d3)) + (_col * 4i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 1i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 2i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 3i))]), ((_k0 + _row) < _SK));
            } else {
                _kv[((_row * 9i) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min((_col * 4i), (u_Q_d3 - 1i)))], ((_col * 4i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 1i), (u_Q_d3 - 1i)))], (((_col * 4i) + 1i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 2i), (u_Q_d3 - 1i)))], (((_col * 4i) + 2i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 3i), (u_Q_d3 - 1i)))], (((_col * 4i) + 3i) < u_Q_d3))), ((_k0 + _row) < _SK));
            }
            if ((((_col * 4i) + 3i) < u_head_dim)) {
                _kv[((144i + (_row * 9i)) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(u_V[((_vbase + (_jf * u_V_d3)) + (_col * 4i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 1i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 2i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 3i))]), ((_k0 + _row) < _SK));
            } else {
                _kv[((144i + (_row * 9i)) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min((_col * 4i), (u_head_dim - 1i)))], ((_col * 4i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 1i), (u_head_dim - 1i)))], (((_col * 4i) + 1i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 2i), (u_head_dim - 1i)))], (((_col * 4i) + 2i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 3i), (u_head_dim - 1i)))], (((_col * 4i) + 3i) < u_head_dim))), ((_k0 + _row) < _SK));
            }
        }
        workgroupBarrier();
        {
            var _s_0: f32;
            var _s_1: f32;
            var _s_2: f32;
            var _s_3: f32;
            var _ka_0: i32;
            var _ka_1: i32;
            var _ka_2: i32;
            var _ka_3: i32;
            var _mt: f32 = _m;
            {
                let _jj_0: i32 = _r;
                let _j_0: i32 = (_k0 + _jj_0);
                let _jc_0: i32 = min(_j_0, (_SK - 1i));
                var _dot_0: f32 = dot(_qr_0, _kv[(_jj_0 * 9i)]);
                {
                    _dot_0 = (_dot_0 + dot(_qr_1, _kv[((_jj_0 * 9i) + 1i)]));
                    _dot_0 = (_dot_0 + dot(_qr_2, _kv[((_jj_0 * 9i) + 2i)]));
                    _dot_0 = (_dot_0 + dot(_qr_3, _kv[((_jj_0 * 9i) + 3i)]));
                    _dot_0 = (_dot_0 + dot(_qr_4, _kv[((_jj_0 * 9i) + 4i)]));
                    _dot_0 = (_dot_0 + dot(_qr_5, _kv[((_jj_0 * 9i) + 5i)]));
                    _dot_0 = (_dot_0 + dot(_qr_6, _kv[((_jj_0 * 9i) + 6i)]));
                    _dot_0 = (_dot_0 + dot(_qr_7, _kv[((_jj_0 * 9i) + 7i)]));
                }
                let _ok_0: bool = (_j_0 < _SK);
                let _sc_0: f32 = _dot_0;
                _fa = select(_fa, min(_fa, _j_0), _ok_0);
                _fn = select(_fn, min(_fn, _j_0), (_ok_0 && (!(_sc_0 <= bitcast<f32>(0xff800000u)))));
                _ka_0 = select(0i, 1i, _ok_0);
                _s_0 = select(bitcast<f32>(0xff800000u), _sc_0, _ok_0);
                _mt = zyn_max_f32(_mt, _s_0);
                let _jj_1: i32 = (4i + _r);
                let _j_1: i32 = (_k0 + _jj_1);
                let _jc_1: i32 = min(_j_1, (_SK - 1i));
                var _dot_1: f32 = dot(_qr_0, _kv[(_jj_1 * 9i)]);
                {
                    _dot_1 = (_dot_1 + dot(_qr_1, _kv[((_jj_1 * 9i) + 1i)]));
                    _dot_1 = (_dot_1 + dot(_qr_2, _kv[((_jj_1 * 9i) + 2i)]));
                    _dot_1 = (_dot_1 + dot(_qr_3, _kv[((_jj_1 * 9i) + 3i)]));
                    _dot_1 = (_dot_1 + dot(_qr_4, _kv[((_jj_1 * 9i) + 4i)]));
                    _dot_1 = (_dot_1 + dot(_qr_5, _kv[((_jj_1 * 9i) + 5i)]));
                    _dot_1 = (_dot_1 + dot(_qr_6, _kv[((_jj_1 * 9i) + 6i)]));
                    _dot_1 = (_dot_1 + dot(_qr_7, _kv[((_jj_1 * 9i) + 7i)]));
                }
                let _ok_1: bool = (_j_1 < _SK);
                let _sc_1: f32 = _dot_1;
                _fa = select(_fa, min(_fa, _j_1), _ok_1);
                _fn = select(_fn, min(_fn, _j_1), (_ok_1 && (!(_sc_1 <= bitcast<f32>(0xff800000u)))));
                _ka_1 = select(0i, 1i, _ok_1);
                _s_1 = select(bitcast<f32>(0xff800000u), _sc_1, _ok_1);
                _mt = zyn_max_f32(_mt, _s_1);
                let _jj_2: i32 = (8i + _r);
                let _j_2: i32 = (_k0 + _jj_2);
                let _jc_2: i32 = min(_j_2, (_SK - 1i));
                var _dot_2: f32 = dot(_qr_0, _kv[(_jj_2 * 9i)]);
                {
                    _dot_2 = (_dot_2 + dot(_qr_1, _kv[((_jj_2 * 9i) + 1i)]));
                    _dot_2 = (_dot_2 + dot(_qr_2, _kv[((_jj_2 * 9i) + 2i)]));
                    _dot_2 = (_dot_2 + dot(_qr_3, _kv[((_jj_2 * 9i) + 3i)]));
                    _dot_2 = (_dot_2 + dot(_qr_4, _kv[((_jj_2 * 9i) + 4i)]));
                    _dot_2 = (_dot_2 + dot(_qr_5, _kv[((_jj_2 * 9i) + 5i)]));
                    _dot_2 = (_dot_2 + dot(_qr_6, _kv[((_jj_2 * 9i) + 6i)]));
                    _dot_2 = (_dot_2 + dot(_qr_7, _kv[((_jj_2 * 9i) + 7i)]));
                }
                let _ok_2: bool = (_j_2 < _SK);
                let _sc_2: f32 = _dot_2;
                _fa = select(_fa, min(_fa, _j_2), _ok_2);
                _fn = select(_fn, min(_fn, _j_2), (_ok_2 && (!(_sc_2 <= bitcast<f32>(0xff800000u)))));
                _ka_2 = select(0i, 1i, _ok_2);
                _s_2 = select(bitcast<f32>(0xff800000u), _sc_2, _ok_2);
                _mt = zyn_max_f32(_mt, _s_2);
                let _jj_3: i32 = (12i + _r);
                let _j_3: i32 = (_k0 + _jj_3);
                let _jc_3: i32 = min(_j_3, (_SK - 1i));
                var _dot_3: f32 = dot(_qr_0, _kv[(_jj_3 * 9i)]);
                {
                    _dot_3 = (_dot_3 + dot(_qr_1, _kv[((_jj_3 * 9i) + 1i)]));
                    _dot_3 = (_dot_3 + dot(_qr_2, _kv[((_jj_3 * 9i) + 2i)]));
                    _dot_3 = (_dot_3 + dot(_qr_3, _kv[((_jj_3 * 9i) + 3i)]));
                    _dot_3 = (_dot_3 + dot(_qr_4, _kv[((_jj_3 * 9i) + 4i)]));
                    _dot_3 = (_dot_3 + dot(_qr_5, _kv[((_jj_3 * 9i) + 5i)]));
                    _dot_3 = (_dot_3 + dot(_qr_6, _kv[((_jj_3 * 9i) + 6i)]));
                    _dot_3 = (_dot_3 + dot(_qr_7, _kv[((_jj_3 * 9i) + 7i)]));
                }
                let _ok_3: bool = (_j_3 < _SK);
                let _sc_3: f32 = _dot_3;
                _fa = select(_fa, min(_fa, _j_3), _ok_3);
                _fn = select(_fn, min(_fn, _j_3), (_ok_3 && (!(_sc_3 <= bitcast<f32>(0xff800000u)))));
                _ka_3 = select(0i, 1i, _ok_3);
                _s_3 = select(bitcast<f32>(0xff800000u), _sc_3, _ok_3);
                _mt = zyn_max_f32(_mt, _s_3);
            }
            let _alpha: f32 = select(1.0f, zyn_exp_f32((_m - _mt)), (!(_mt <= bitcast<f32>(0xff800000u))));
            _l = (_l * _alpha);
            {
                _o_0 = (_o_0 * vec4<f32>(_alpha));
                _o_1 = (_o_1 * vec4<f32>(_alpha));
                _o_2 = (_o_2 * vec4<f32>(_alpha));
                _o_3 = (_o_3 * vec4<f32>(_alpha));
                _o_4 = (_o_4 * vec4<f32>(_alpha));
                _o_5 = (_o_5 * vec4<f32>(_alpha));
                _o_6 = (_o_6 * vec4<f32>(_alpha));
                _o_7 = (_o_7 * vec4<f32>(_alpha));
            }
            {
                let _p_0: f32 = select(0.0f, zyn_exp_f32((_s_0 - _mt)), (!(_s_0 <= bitcast<f32>(0xff800000u))));
                _l = (_l + _p_0);
                let _jj_0: i32 = _r;
                if ((_ka_0 != 0i)) {
                    {
                        _o_0 = (_o_0 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 9i) + 144i)]));
                        _o_1 = (_o_1 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 9i) + 145i)]));
                        _o_2 = (_o_2 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 9i) + 146i)]));
                        _o_3 = (_o_3 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 9i) + 147i)]));
                        _o_4 = (_o_4 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 9i) + 148i)]));
                        _o_5 = (_o_5 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 9i) + 149i)]));
                        _o_6 = (_o_6 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 9i) + 150i)]));
                        _o_7 = (_o_7 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 9i) + 151i)]));
                    }
                }
                let _p_1: f32 = select(0.0f, zyn_exp_f32((_s_1 - _mt)), (!(_s_1 <= bitcast<f32>(0xff800000u))));
                _l = (_l + _p_1);
                let _jj_1: i32 = (4i + _r);
                if ((_ka_1 != 0i)) {
                    {
                        _o_0 = (_o_0 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 9i) + 144i)]));
                        _o_1 = (_o_1 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 9i) + 145i)]));
                        _o_2 = (_o_2 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 9i) + 146i)]));
                        _o_3 = (_o_3 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 9i) + 147i)]));
                        _o_4 = (_o_4 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 9i) + 148i)]));
                        _o_5 = (_o_5 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 9i) + 149i)]));
                        _o_6 = (_o_6 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 9i) + 150i)]));
                        _o_7 = (_o_7 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 9i) + 151i)]));
                    }
                }
                let _p_2: f32 = select(0.0f, zyn_exp_f32((_s_2 - _mt)), (!(_s_2 <= bitcast<f32>(0xff800000u))));
                _l = (_l + _p_2);
                let _jj_2: i32 = (8i + _r);
                if ((_ka_2 != 0i)) {
                    {
                        _o_0 = (_o_0 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 9i) + 144i)]));
                        _o_1 = (_o_1 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 9i) + 145i)]));
                        _o_2 = (_o_2 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 9i) + 146i)]));
                        _o_3 = (_o_3 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 9i) + 147i)]));
                        _o_4 = (_o_4 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 9i) + 148i)]));
                        _o_5 = (_o_5 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 9i) + 149i)]));
                        _o_6 = (_o_6 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 9i) + 150i)]));
                        _o_7 = (_o_7 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 9i) + 151i)]));
                    }
                }
                let _p_3: f32 = select(0.0f, zyn_exp_f32((_s_3 - _mt)), (!(_s_3 <= bitcast<f32>(0xff800000u))));
                _l = (_l + _p_3);
                let _jj_3: i32 = (12i + _r);
                if ((_ka_3 != 0i)) {
                    {
                        _o_0 = (_o_0 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 9i) + 144i)]));
                        _o_1 = (_o_1 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 9i) + 145i)]));
                        _o_2 = (_o_2 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 9i) + 146i)]));
                        _o_3 = (_o_3 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 9i) + 147i)]));
                        _o_4 = (_o_4 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 9i) + 148i)]));
                        _o_5 = (_o_5 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 9i) + 149i)]));
                        _o_6 = (_o_6 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 9i) + 150i)]));
                        _o_7 = (_o_7 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 9i) + 151i)]));
                    }
                }
            }
            _m = _mt;
        }
    }
    _ml[_t] = _m;
    _ml[(_t + 128i)] = _l;
    _fk[_t] = _fa;
    _fk[(_t + 128i)] = _fn;
    workgroupBarrier();
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        _fa = min(_fa, _fk[((_q * 4i) + _x)]);
        _fn = min(_fn, _fk[(((_q * 4i) + _x) + 128i)]);
    }
    var _M: f32 = bitcast<f32>(0xff800000u);
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        _M = zyn_max_f32(_M, _ml[((_q * 4i) + _x)]);
    }
    var _L: f32 = 0.0f;
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        let _mx: f32 = _ml[((_q * 4i) + _x)];
        _L = (_L + (_ml[(((_q * 4i) + _x) + 128i)] * select(zyn_exp_f32((_mx - _M)), 0.0f, (_mx <= bitcast<f32>(0xff800000u)))));
    }
    let _f: f32 = select(zyn_exp_f32((_m - _M)), 0.0f, (_m <= bitcast<f32>(0xff800000u)));
    {
        _o_0 = (_o_0 * vec4<f32>(_f));
        _o_1 = (_o_1 * vec4<f32>(_f));
        _o_2 = (_o_2 * vec4<f32>(_f));
        _o_3 = (_o_3 * vec4<f32>(_f));
        _o_4 = (_o_4 * vec4<f32>(_f));
        _o_5 = (_o_5 * vec4<f32>(_f));
        _o_6 = (_o_6 * vec4<f32>(_f));
        _o_7 = (_o_7 * vec4<f32>(_f));
    }
    for (var _x: i32 = 1i; _x < 4i; _x++) {
        if ((_r == _x)) {
            {
                _kv[(_q * 8i)] = _o_0;
                _kv[((_q * 8i) + 1i)] = _o_1;
                _kv[((_q * 8i) + 2i)] = _o_2;
                _kv[((_q * 8i) + 3i)] = _o_3;
                _kv[((_q * 8i) + 4i)] = _o_4;
                _kv[((_q * 8i) + 5i)] = _o_5;
                _kv[((_q * 8i) + 6i)] = _o_6;
                _kv[((_q * 8i) + 7i)] = _o_7;
            }
        }
        workgroupBarrier();
        if ((_r == 0i)) {
            {
                _o_0 = (_o_0 + _kv[(_q * 8i)]);
                _o_1 = (_o_1 + _kv[((_q * 8i) + 1i)]);
                _o_2 = (_o_2 + _kv[((_q * 8i) + 2i)]);
                _o_3 = (_o_3 + _kv[((_q * 8i) + 3i)]);
                _o_4 = (_o_4 + _kv[((_q * 8i) + 4i)]);
                _o_5 = (_o_5 + _kv[((_q * 8i) + 5i)]);
                _o_6 = (_o_6 + _kv[((_q * 8i) + 6i)]);
                _o_7 = (_o_7 + _kv[((_q * 8i) + 7i)]);
            }
        }
        workgroupBarrier();
    }
    if (((_qi < _S) && (_r == 0i))) {
        let _inv: f32 = select((1.0f / _L), bitcast<f32>(0x7fc00000u), ((_fa < _fn) && ((_fn == _SK) || (_fn >= 64i))));
        {
            if ((0i < u_head_dim)) { u_out[_orow] = (_o_0[0] * _inv); }
            if ((1i < u_head_dim)) { u_out[(_orow + 1i)] = (_o_0[1] * _inv); }
            if ((2i < u_head_dim)) { u_out[(_orow + 2i)] = (_o_0[2] * _inv); }
            if ((3i < u_head_dim)) { u_out[(_orow + 3i)] = (_o_0[3] * _inv); }
            if ((4i < u_head_dim)) { u_out[(_orow + 4i)] = (_o_1[0] * _inv); }
            if ((5i < u_head_dim)) { u_out[(_orow + 5i)] = (_o_1[1] * _inv); }
            if ((6i < u_head_dim)) { u_out[(_orow + 6i)] = (_o_1[2] * _inv); }
            if ((7i < u_head_dim)) { u_out[(_orow + 7i)] = (_o_1[3] * _inv); }
            if ((8i < u_head_dim)) { u_out[(_orow + 8i)] = (_o_2[0] * _inv); }
            if ((9i < u_head_dim)) { u_out[(_orow + 9i)] = (_o_2[1] * _inv); }
            if ((10i < u_head_dim)) { u_out[(_orow + 10i)] = (_o_2[2] * _inv); }
            if ((11i < u_head_dim)) { u_out[(_orow + 11i)] = (_o_2[3] * _inv); }
            if ((12i < u_head_dim)) { u_out[(_orow + 12i)] = (_o_3[0] * _inv); }
            if ((13i < u_head_dim)) { u_out[(_orow + 13i)] = (_o_3[1] * _inv); }
            if ((14i < u_head_dim)) { u_out[(_orow + 14i)] = (_o_3[2] * _inv); }
            if ((15i < u_head_dim)) { u_out[(_orow + 15i)] = (_o_3[3] * _inv); }
            if ((16i < u_head_dim)) { u_out[(_orow + 16i)] = (_o_4[0] * _inv); }
            if ((17i < u_head_dim)) { u_out[(_orow + 17i)] = (_o_4[1] * _inv); }
            if ((18i < u_head_dim)) { u_out[(_orow + 18i)] = (_o_4[2] * _inv); }
            if ((19i < u_head_dim)) { u_out[(_orow + 19i)] = (_o_4[3] * _inv); }
            if ((20i < u_head_dim)) { u_out[(_orow + 20i)] = (_o_5[0] * _inv); }
            if ((21i < u_head_dim)) { u_out[(_orow + 21i)] = (_o_5[1] * _inv); }
            if ((22i < u_head_dim)) { u_out[(_orow + 22i)] = (_o_5[2] * _inv); }
            if ((23i < u_head_dim)) { u_out[(_orow + 23i)] = (_o_5[3] * _inv); }
            if ((24i < u_head_dim)) { u_out[(_orow + 24i)] = (_o_6[0] * _inv); }
            if ((25i < u_head_dim)) { u_out[(_orow + 25i)] = (_o_6[1] * _inv); }
            if ((26i < u_head_dim)) { u_out[(_orow + 26i)] = (_o_6[2] * _inv); }
            if ((27i < u_head_dim)) { u_out[(_orow + 27i)] = (_o_6[3] * _inv); }
            if ((28i < u_head_dim)) { u_out[(_orow + 28i)] = (_o_7[0] * _inv); }
            if ((29i < u_head_dim)) { u_out[(_orow + 29i)] = (_o_7[1] * _inv); }
            if ((30i < u_head_dim)) { u_out[(_orow + 30i)] = (_o_7[2] * _inv); }
            if ((31i < u_head_dim)) { u_out[(_orow + 31i)] = (_o_7[3] * _inv); }
        }
    }
}

// attention, head_dim up to 64: 32 queries per block, 4 threads each
@compute @workgroup_size(128)
fn zyn_k_flash_attention_d64(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_K_d0: i32 = zyn_p.u_K_d0;
    let u_K_d1: i32 = zyn_p.u_K_d1;
    let u_K_d2: i32 = zyn_p.u_K_d2;
    let u_K_d3: i32 = zyn_p.u_K_d3;
    let u_Q_d0: i32 = zyn_p.u_Q_d0;
    let u_Q_d1: i32 = zyn_p.u_Q_d1;
    let u_Q_d2: i32 = zyn_p.u_Q_d2;
    let u_Q_d3: i32 = zyn_p.u_Q_d3;
    let u_V_d0: i32 = zyn_p.u_V_d0;
    let u_V_d1: i32 = zyn_p.u_V_d1;
    let u_V_d2: i32 = zyn_p.u_V_d2;
    let u_V_d3: i32 = zyn_p.u_V_d3;
    let u_batch: i32 = zyn_p.u_batch;
    let u_head_dim: i32 = zyn_p.u_head_dim;
    let u_heads: i32 = zyn_p.u_heads;
    let u_seq_len: i32 = zyn_p.u_seq_len;
    // _kv: workgroup memory, declared above
    // _ml: workgroup memory, declared above
    // _fk: workgroup memory, declared above
    let _S: i32 = u_seq_len;
    let _SK: i32 = u_seq_len;
    let _nqb: i32 = zyn_tdiv((u_seq_len + 31i), 32i);
    let _bh: i32 = zyn_tdiv(zyn_block, _nqb);
    let _h: i32 = zyn_trem(_bh, u_heads);
    let _b: i32 = zyn_tdiv(_bh, u_heads);
    let _t: i32 = zyn_thread;
    let _q: i32 = zyn_tdiv(_t, 4i);
    let _r: i32 = zyn_trem(_t, 4i);
    let _qi: i32 = ((zyn_trem(zyn_block, _nqb) * 32i) + _q);
    let _qc: i32 = min(_qi, (_S - 1i));
    let _qrow: i32 = (((((_b * u_Q_d1) * u_Q_d2) * u_Q_d3) + ((_h * u_Q_d2) * u_Q_d3)) + (_qc * u_Q_d3));
    let _kbase: i32 = ((((_b * u_K_d1) * u_K_d2) * u_K_d3) + ((_h * u_K_d2) * u_K_d3));
    let _vbase: i32 = ((((_b * u_V_d1) * u_V_d2) * u_V_d3) + ((_h * u_V_d2) * u_V_d3));
    let _orow: i32 = (((((_b * u_heads) * u_seq_len) * u_head_dim) + ((_h * u_seq_len) * u_head_dim)) + (_qc * u_head_dim));
    let _scale: f32 = (1.0f / sqrt(f32(u_head_dim)));
    var _qr_0: vec4<f32>;
    var _qr_1: vec4<f32>;
    var _qr_2: vec4<f32>;
    var _qr_3: vec4<f32>;
    var _qr_4: vec4<f32>;
    var _qr_5: vec4<f32>;
    var _qr_6: vec4<f32>;
    var _qr_7: vec4<f32>;
    var _qr_8: vec4<f32>;
    var _qr_9: vec4<f32>;
    var _qr_10: vec4<f32>;
    var _qr_11: vec4<f32>;
    var _qr_12: vec4<f32>;
    var _qr_13: vec4<f32>;
    var _qr_14: vec4<f32>;
    var _qr_15: vec4<f32>;
    var _o_0: vec4<f32>;
    var _o_1: vec4<f32>;
    var _o_2: vec4<f32>;
    var _o_3: vec4<f32>;
    var _o_4: vec4<f32>;
    var _o_5: vec4<f32>;
    var _o_6: vec4<f32>;
    var _o_7: vec4<f32>;
    var _o_8: vec4<f32>;
    var _o_9: vec4<f32>;
    var _o_10: vec4<f32>;
    var _o_11: vec4<f32>;
    var _o_12: vec4<f32>;
    var _o_13: vec4<f32>;
    var _o_14: vec4<f32>;
    var _o_15: vec4<f32>;
    {
        _qr_0 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(0i, (u_Q_d3 - 1i)))], (0i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(1i, (u_Q_d3 - 1i)))], (1i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(2i, (u_Q_d3 - 1i)))], (2i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(3i, (u_Q_d3 - 1i)))], (3i < u_Q_d3))) * vec4<f32>(_scale));
        _o_0 = vec4<f32>(0.0f);
        _qr_1 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(4i, (u_Q_d3 - 1i)))], (4i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(5i, (u_Q_d3 - 1i)))], (5i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(6i, (u_Q_d3 - 1i)))], (6i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(7i, (u_Q_d3 - 1i)))], (7i < u_Q_d3))) * vec4<f32>(_scale));
        _o_1 = vec4<f32>(0.0f);
        _qr_2 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(8i, (u_Q_d3 - 1i)))], (8i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(9i, (u_Q_d3 - 1i)))], (9i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(10i, (u_Q_d3 - 1i)))], (10i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(11i, (u_Q_d3 - 1i)))], (11i < u_Q_d3))) * vec4<f32>(_scale));
        _o_2 = vec4<f32>(0.0f);
        _qr_3 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(12i, (u_Q_d3 - 1i)))], (12i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(13i, (u_Q_d3 - 1i)))], (13i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(14i, (u_Q_d3 - 1i)))], (14i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(15i, (u_Q_d3 - 1i)))], (15i < u_Q_d3))) * vec4<f32>(_scale));
        _o_3 = vec4<f32>(0.0f);
        _qr_4 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(16i, (u_Q_d3 - 1i)))], (16i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(17i, (u_Q_d3 - 1i)))], (17i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(18i, (u_Q_d3 - 1i)))], (18i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(19i, (u_Q_d3 - 1i)))], (19i < u_Q_d3))) * vec4<f32>(_scale));
        _o_4 = vec4<f32>(0.0f);
        _qr_5 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(20i, (u_Q_d3 - 1i)))], (20i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(21i, (u_Q_d3 - 1i)))], (21i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(22i, (u_Q_d3 - 1i)))], (22i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(23i, (u_Q_d3 - 1i)))], (23i < u_Q_d3))) * vec4<f32>(_scale));
        _o_5 = vec4<f32>(0.0f);
        _qr_6 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(24i, (u_Q_d3 - 1i)))], (24i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(25i, (u_Q_d3 - 1i)))], (25i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(26i, (u_Q_d3 - 1i)))], (26i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(27i, (u_Q_d3 - 1i)))], (27i < u_Q_d3))) * vec4<f32>(_scale));
        _o_6 = vec4<f32>(0.0f);
        _qr_7 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(28i, (u_Q_d3 - 1i)))], (28i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(29i, (u_Q_d3 - 1i)))], (29i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(30i, (u_Q_d3 - 1i)))], (30i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(31i, (u_Q_d3 - 1i)))], (31i < u_Q_d3))) * vec4<f32>(_scale));
        _o_7 = vec4<f32>(0.0f);
        _qr_8 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(32i, (u_Q_d3 - 1i)))], (32i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(33i, (u_Q_d3 - 1i)))], (33i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(34i, (u_Q_d3 - 1i)))], (34i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(35i, (u_Q_d3 - 1i)))], (35i < u_Q_d3))) * vec4<f32>(_scale));
        _o_8 = vec4<f32>(0.0f);
        _qr_9 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(36i, (u_Q_d3 - 1i)))], (36i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(37i, (u_Q_d3 - 1i)))], (37i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(38i, (u_Q_d3 - 1i)))], (38i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(39i, (u_Q_d3 - 1i)))], (39i < u_Q_d3))) * vec4<f32>(_scale));
        _o_9 = vec4<f32>(0.0f);
        _qr_10 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(40i, (u_Q_d3 - 1i)))], (40i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(41i, (u_Q_d3 - 1i)))], (41i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(42i, (u_Q_d3 - 1i)))], (42i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(43i, (u_Q_d3 - 1i)))], (43i < u_Q_d3))) * vec4<f32>(_scale));
        _o_10 = vec4<f32>(0.0f);
        _qr_11 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(44i, (u_Q_d3 - 1i)))], (44i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(45i, (u_Q_d3 - 1i)))], (45i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(46i, (u_Q_d3 - 1i)))], (46i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(47i, (u_Q_d3 - 1i)))], (47i < u_Q_d3))) * vec4<f32>(_scale));
        _o_11 = vec4<f32>(0.0f);
        _qr_12 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(48i, (u_Q_d3 - 1i)))], (48i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(49i, (u_Q_d3 - 1i)))], (49i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(50i, (u_Q_d3 - 1i)))], (50i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(51i, (u_Q_d3 - 1i)))], (51i < u_Q_d3))) * vec4<f32>(_scale));
        _o_12 = vec4<f32>(0.0f);
        _qr_13 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(52i, (u_Q_d3 - 1i)))], (52i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(53i, (u_Q_d3 - 1i)))], (53i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(54i, (u_Q_d3 - 1i)))], (54i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(55i, (u_Q_d3 - 1i)))], (55i < u_Q_d3))) * vec4<f32>(_scale));
        _o_13 = vec4<f32>(0.0f);
        _qr_14 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(56i, (u_Q_d3 - 1i)))], (56i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(57i, (u_Q_d3 - 1i)))], (57i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(58i, (u_Q_d3 - 1i)))], (58i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(59i, (u_Q_d3 - 1i)))], (59i < u_Q_d3))) * vec4<f32>(_scale));
        _o_14 = vec4<f32>(0.0f);
        _qr_15 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(60i, (u_Q_d3 - 1i)))], (60i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(61i, (u_Q_d3 - 1i)))], (61i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(62i, (u_Q_d3 - 1i)))], (62i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(63i, (u_Q_d3 - 1i)))], (63i < u_Q_d3))) * vec4<f32>(_scale));
        _o_15 = vec4<f32>(0.0f);
    }
    var _m: f32 = bitcast<f32>(0xff800000u);
    var _l: f32 = 0.0f;
    var _fa: i32 = _SK;
    var _fn: i32 = _SK;
    for (var _k0: i32 = 0i; _k0 < _SK; _k0 += 16i) {
        workgroupBarrier();
        for (var _e: i32 = _t; _e < 256i; _e += 128i) {
            let _row: i32 = zyn_tdiv(_e, 16i);
            let _col: i32 = zyn_trem(_e, 16i);
            let _jf: i32 = min((_k0 + _row), (_SK - 1i));
            if ((((_col * 4i) + 3i) < u_Q_d3)) {
                _kv[((_row * 17i) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(u_K[((_kbase + (_jf * u_K_d3)) + (_col * 4i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 1i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 2i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 3i))]), ((_k0 + _row) < _SK));
            } else {
                _kv[((_row * 17i) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min((_col * 4i), (u_Q_d3 - 1i)))], ((_col * 4i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 1i), (u_Q_d3 - 1i)))], (((_col * 4i) + 1i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 2i), (u_Q_d3 - 1i)))], (((_col * 4i) + 2i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 3i), (u_Q_d3 - 1i)))], (((_col * 4i) + 3i) < u_Q_d3))), ((_k0 + _row) < _SK));
            }
            if ((((_col * 4i) + 3i) < u_head_dim)) {
                _kv[((272i + (_row * 17i)) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(u_V[((_vbase + (_jf * u_V_d3)) + (_col * 4i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 1i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 2i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 3i))]), ((_k0 + _row) < _SK));
            } else {
                _kv[((272i + (_row * 17i)) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min((_col * 4i), (u_head_dim - 1i)))], ((_col * 4i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 1i), (u_head_dim - 1i)))], (((_col * 4i) + 1i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 2i), (u_head_dim - 1i)))], (((_col * 4i) + 2i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 3i), (u_head_dim - 1i)))], (((_col * 4i) + 3i) < u_head_dim))), ((_k0 + _row) < _SK));
            }
        }
        workgroupBarrier();
        {
            var _s_0: f32;
            var _s_1: f32;
            var _s_2: f32;
            var _s_3: f32;
            var _ka_0: i32;
            var _ka_1: i32;
            var _ka_2: i32;
            var _ka_3: i32;
            var _mt: f32 = _m;
            {
                let _jj_0: i32 = _r;
                let _j_0: i32 = (_k0 + _jj_0);
                let _jc_0: i32 = min(_j_0, (_SK - 1i));
                var _dot_0: f32 = dot(_qr_0, _kv[(_jj_0 * 17i)]);
                {
                    _dot_0 = (_dot_0 + dot(_qr_1, _kv[((_jj_0 * 17i) + 1i)]));
                    _dot_0 = (_dot_0 + dot(_qr_2, _kv[((_jj_0 * 17i) + 2i)]));
                    _dot_0 = (_dot_0 + dot(_qr_3, _kv[((_jj_0 * 17i) + 3i)]));
                    _dot_0 = (_dot_0 + dot(_qr_4, _kv[((_jj_0 * 17i) + 4i)]));
                    _dot_0 = (_dot_0 + dot(_qr_5, _kv[((_jj_0 * 17i) + 5i)]));
                    _dot_0 = (_dot_0 + dot(_qr_6, _kv[((_jj_0 * 17i) + 6i)]));
                    _dot_0 = (_dot_0 + dot(_qr_7, _kv[((_jj_0 * 17i) + 7i)]));
                    _dot_0 = (_dot_0 + dot(_qr_8, _kv[((_jj_0 * 17i) + 8i)]));
                    _dot_0 = (_dot_0 + dot(_qr_9, _kv[((_jj_0 * 17i) + 9i)]));
                    _dot_0 = (_dot_0 + dot(_qr_10, _kv[((_jj_0 * 17i) + 10i)]));
                    _dot_0 = (_dot_0 + dot(_qr_11, _kv[((_jj_0 * 17i) + 11i)]));
                    _dot_0 = (_dot_0 + dot(_qr_12, _kv[((_jj_0 * 17i) + 12i)]));
                    _dot_0 = (_dot_0 + dot(_qr_13, _kv[((_jj_0 * 17i) + 13i)]));
                    _dot_0 = (_dot_0 + dot(_qr_14, _kv[((_jj_0 * 17i) + 14i)]));
                    _dot_0 = (_dot_0 + dot(_qr_15, _kv[((_jj_0 * 17i) + 15i)]));
                }
                let _ok_0: bool = (_j_0 < _SK);
                let _sc_0: f32 = _dot_0;
                _fa = select(_fa, min(_fa, _j_0), _ok_0);
                _fn = select(_fn, min(_fn, _j_0), (_ok_0 && (!(_sc_0 <= bitcast<f32>(0xff800000u)))));
                _ka_0 = select(0i, 1i, _ok_0);
                _s_0 = select(bitcast<f32>(0xff800000u), _sc_0, _ok_0);
                _mt = zyn_max_f32(_mt, _s_0);
                let _jj_1: i32 = (4i + _r);
                let _j_1: i32 = (_k0 + _jj_1);
                let _jc_1: i32 = min(_j_1, (_SK - 1i));
                var _dot_1: f32 = dot(_qr_0, _kv[(_jj_1 * 17i)]);
                {
                    _dot_1 = (_dot_1 + dot(_qr_1, _kv[((_jj_1 * 17i) + 1i)]));
                    _dot_1 = (_dot_1 + dot(_qr_2, _kv[((_jj_1 * 17i) + 2i)]));
                    _dot_1 = (_dot_1 + dot(_qr_3, _kv[((_jj_1 * 17i) + 3i)]));
                    _dot_1 = (_dot_1 + dot(_qr_4, _kv[((_jj_1 * 17i) + 4i)]));
                    _dot_1 = (_dot_1 + dot(_qr_5, _kv[((_jj_1 * 17i) + 5i)]));
                    _dot_1 = (_dot_1 + dot(_qr_6, _kv[((_jj_1 * 17i) + 6i)]));
                    _dot_1 = (_dot_1 + dot(_qr_7, _kv[((_jj_1 * 17i) + 7i)]));
                    _dot_1 = (_dot_1 + dot(_qr_8, _kv[((_jj_1 * 17i) + 8i)]));
                    _dot_1 = (_dot_1 + dot(_qr_9, _kv[((_jj_1 * 17i) + 9i)]));
                    _dot_1 = (_dot_1 + dot(_qr_10, _kv[((_jj_1 * 17i) + 10i)]));
                    _dot_1 = (_dot_1 + dot(_qr_11, _kv[((_jj_1 * 17i) + 11i)]));
                    _dot_1 = (_dot_1 + dot(_qr_12, _kv[((_jj_1 * 17i) + 12i)]));
                    _dot_1 = (_dot_1 + dot(_qr_13, _kv[((_jj_1 * 17i) + 13i)]));
                    _dot_1 = (_dot_1 + dot(_qr_14, _kv[((_jj_1 * 17i) + 14i)]));
                    _dot_1 = (_dot_1 + dot(_qr_15, _kv[((_jj_1 * 17i) + 15i)]));
                }
                let _ok_1: bool = (_j_1 < _SK);
                let _sc_1: f32 = _dot_1;
                _fa = select(_fa, min(_fa, _j_1), _ok_1);
                _fn = select(_fn, min(_fn, _j_1), (_ok_1 && (!(_sc_1 <= bitcast<f32>(0xff800000u)))));
                _ka_1 = select(0i, 1i, _ok_1);
                _s_1 = select(bitcast<f32>(0xff800000u), _sc_1, _ok_1);
                _mt = zyn_max_f32(_mt, _s_1);
                let _jj_2: i32 = (8i + _r);
                let _j_2: i32 = (_k0 + _jj_2);
                let _jc_2: i32 = min(_j_2, (_SK - 1i));
                var _dot_2: f32 = dot(_qr_0, _kv[(_jj_2 * 17i)]);
                {
                    _dot_2 = (_dot_2 + dot(_qr_1, _kv[((_jj_2 * 17i) + 1i)]));
                    _dot_2 = (_dot_2 + dot(_qr_2, _kv[((_jj_2 * 17i) + 2i)]));
                    _dot_2 = (_dot_2 + dot(_qr_3, _kv[((_jj_2 * 17i) + 3i)]));
                    _dot_2 = (_dot_2 + dot(_qr_4, _kv[((_jj_2 * 17i) + 4i)]));
                    _dot_2 = (_dot_2 + dot(_qr_5, _kv[((_jj_2 * 17i) + 5i)]));
                    _dot_2 = (_dot_2 + dot(_qr_6, _kv[((_jj_2 * 17i) + 6i)]));
                    _dot_2 = (_dot_2 + dot(_qr_7, _kv[((_jj_2 * 17i) + 7i)]));
                    _dot_2 = (_dot_2 + dot(_qr_8, _kv[((_jj_2 * 17i) + 8i)]));
                    _dot_2 = (_dot_2 + dot(_qr_9, _kv[((_jj_2 * 17i) + 9i)]));
                    _dot_2 = (_dot_2 + dot(_qr_10, _kv[((_jj_2 * 17i) + 10i)]));
                    _dot_2 = (_dot_2 + dot(_qr_11, _kv[((_jj_2 * 17i) + 11i)]));
                    _dot_2 = (_dot_2 + dot(_qr_12, _kv[((_jj_2 * 17i) + 12i)]));
                    _dot_2 = (_dot_2 + dot(_qr_13, _kv[((_jj_2 * 17i) + 13i)]));
                    _dot_2 = (_dot_2 + dot(_qr_14, _kv[((_jj_2 * 17i) + 14i)]));
                    _dot_2 = (_dot_2 + dot(_qr_15, _kv[((_jj_2 * 17i) + 15i)]));
                }
                let _ok_2: bool = (_j_2 < _SK);
                let _sc_2: f32 = _dot_2;
                _fa = select(_fa, min(_fa, _j_2), _ok_2);
                _fn = select(_fn, min(_fn, _j_2), (_ok_2 && (!(_sc_2 <= bitcast<f32>(0xff800000u)))));
                _ka_2 = select(0i, 1i, _ok_2);
                _s_2 = select(bitcast<f32>(0xff800000u), _sc_2, _ok_2);
                _mt = zyn_max_f32(_mt, _s_2);
                let _jj_3: i32 = (12i + _r);
                let _j_3: i32 = (_k0 + _jj_3);
                let _jc_3: i32 = min(_j_3, (_SK - 1i));
                var _dot_3: f32 = dot(_qr_0, _kv[(_jj_3 * 17i)]);
                {
                    _dot_3 = (_dot_3 + dot(_qr_1, _kv[((_jj_3 * 17i) + 1i)]));
                    _dot_3 = (_dot_3 + dot(_qr_2, _kv[((_jj_3 * 17i) + 2i)]));
                    _dot_3 = (_dot_3 + dot(_qr_3, _kv[((_jj_3 * 17i) + 3i)]));
                    _dot_3 = (_dot_3 + dot(_qr_4, _kv[((_jj_3 * 17i) + 4i)]));
                    _dot_3 = (_dot_3 + dot(_qr_5, _kv[((_jj_3 * 17i) + 5i)]));
                    _dot_3 = (_dot_3 + dot(_qr_6, _kv[((_jj_3 * 17i) + 6i)]));
                    _dot_3 = (_dot_3 + dot(_qr_7, _kv[((_jj_3 * 17i) + 7i)]));
                    _dot_3 = (_dot_3 + dot(_qr_8, _kv[((_jj_3 * 17i) + 8i)]));
                    _dot_3 = (_dot_3 + dot(_qr_9, _kv[((_jj_3 * 17i) + 9i)]));
                    _dot_3 = (_dot_3 + dot(_qr_10, _kv[((_jj_3 * 17i) + 10i)]));
                    _dot_3 = (_dot_3 + dot(_qr_11, _kv[((_jj_3 * 17i) + 11i)]));
                    _dot_3 = (_dot_3 + dot(_qr_12, _kv[((_jj_3 * 17i) + 12i)]));
                    _dot_3 = (_dot_3 + dot(_qr_13, _kv[((_jj_3 * 17i) + 13i)]));
                    _dot_3 = (_dot_3 + dot(_qr_14, _kv[((_jj_3 * 17i) + 14i)]));
                    _dot_3 = (_dot_3 + dot(_qr_15, _kv[((_jj_3 * 17i) + 15i)]));
                }
                let _ok_3: bool = (_j_3 < _SK);
                let _sc_3: f32 = _dot_3;
                _fa = select(_fa, min(_fa, _j_3), _ok_3);
                _fn = select(_fn, min(_fn, _j_3), (_ok_3 && (!(_sc_3 <= bitcast<f32>(0xff800000u)))));
                _ka_3 = select(0i, 1i, _ok_3);
                _s_3 = select(bitcast<f32>(0xff800000u), _sc_3, _ok_3);
                _mt = zyn_max_f32(_mt, _s_3);
            }
            let _alpha: f32 = select(1.0f, zyn_exp_f32((_m - _mt)), (!(_mt <= bitcast<f32>(0xff800000u))));
            _l = (_l * _alpha);
            {
                _o_0 = (_o_0 * vec4<f32>(_alpha));
                _o_1 = (_o_1 * vec4<f32>(_alpha));
                _o_2 = (_o_2 * vec4<f32>(_alpha));
                _o_3 = (_o_3 * vec4<f32>(_alpha));
                _o_4 = (_o_4 * vec4<f32>(_alpha));
                _o_5 = (_o_5 * vec4<f32>(_alpha));
                _o_6 = (_o_6 * vec4<f32>(_alpha));
                _o_7 = (_o_7 * vec4<f32>(_alpha));
                _o_8 = (_o_8 * vec4<f32>(_alpha));
                _o_9 = (_o_9 * vec4<f32>(_alpha));
                _o_10 = (_o_10 * vec4<f32>(_alpha));
                _o_11 = (_o_11 * vec4<f32>(_alpha));
                _o_12 = (_o_12 * vec4<f32>(_alpha));
                _o_13 = (_o_13 * vec4<f32>(_alpha));
                _o_14 = (_o_14 * vec4<f32>(_alpha));
                _o_15 = (_o_15 * vec4<f32>(_alpha));
            }
            {
                let _p_0: f32 = select(0.0f, zyn_exp_f32((_s_0 - _mt)), (!(_s_0 <= bitcast<f32>(0xff800000u))));
                _l = (_l + _p_0);
                let _jj_0: i32 = _r;
                if ((_ka_0 != 0i)) {
                    {
                        _o_0 = (_o_0 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 272i)]));
                        _o_1 = (_o_1 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 273i)]));
                        _o_2 = (_o_2 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 274i)]));
                        _o_3 = (_o_3 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 275i)]));
                        _o_4 = (_o_4 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 276i)]));
                        _o_5 = (_o_5 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 277i)]));
                        _o_6 = (_o_6 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 278i)]));
                        _o_7 = (_o_7 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 279i)]));
                        _o_8 = (_o_8 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 280i)]));
                        _o_9 = (_o_9 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 281i)]));
                        _o_10 = (_o_10 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 282i)]));
                        _o_11 = (_o_11 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 283i)]));
                        _o_12 = (_o_12 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 284i)]));
                        _o_13 = (_o_13 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 285i)]));
                        _o_14 = (_o_14 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 286i)]));
                        _o_15 = (_o_15 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 17i) + 287i)]));
                    }
                }
                let _p_1: f32 = select(0.0f, zyn_exp_f32((_s_1 - _mt)), (!(_s_1 <= bitcast<f32>(0xff800000u))));
                _l = (_l + _p_1);
                let _jj_1: i32 = (4i + _r);
                if ((_ka_1 != 0i)) {
                    {
                        _o_0 = (_o_0 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 272i)]));
                        _o_1 = (_o_1 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 273i)]));
                        _o_2 = (_o_2 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 274i)]));
                        _o_3 = (_o_3 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 275i)]));
                        _o_4 = (_o_4 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 276i)]));
                        _o_5 = (_o_5 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 277i)]));
                        _o_6 = (_o_6 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 278i)]));
                        _o_7 = (_o_7 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 279i)]));
                        _o_8 = (_o_8 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 280i)]));
                        _o_9 = (_o_9 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 281i)]));
                        _o_10 = (_o_10 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 282i)]));
                        _o_11 = (_o_11 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 283i)]));
                        _o_12 = (_o_12 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 284i)]));
                        _o_13 = (_o_13 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 285i)]));
                        _o_14 = (_o_14 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 286i)]));
                        _o_15 = (_o_15 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 17i) + 287i)]));
                    }
                }
                let _p_2: f32 = select(0.0f, zyn_exp_f32((_s_2 - _mt)), (!(_s_2 <= bitcast<f32>(0xff800000u))));
                _l = (_l + _p_2);
                let _jj_2: i32 = (8i + _r);
                if ((_ka_2 != 0i)) {
                    {
                        _o_0 = (_o_0 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 272i)]));
                        _o_1 = (_o_1 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 273i)]));
                        _o_2 = (_o_2 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 274i)]));
                        _o_3 = (_o_3 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 275i)]));
                        _o_4 = (_o_4 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 276i)]));
                        _o_5 = (_o_5 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 277i)]));
                        _o_6 = (_o_6 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 278i)]));
                        _o_7 = (_o_7 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 279i)]));
                        _o_8 = (_o_8 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 280i)]));
                        _o_9 = (_o_9 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 281i)]));
                        _o_10 = (_o_10 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 282i)]));
                        _o_11 = (_o_11 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 283i)]));
                        _o_12 = (_o_12 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 284i)]));
                        _o_13 = (_o_13 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 285i)]));
                        _o_14 = (_o_14 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 286i)]));
                        _o_15 = (_o_15 + (vec4<f32>(_p_2) * _kv[((_jj_2 * 17i) + 287i)]));
                    }
                }
                let _p_3: f32 = select(0.0f, zyn_exp_f32((_s_3 - _mt)), (!(_s_3 <= bitcast<f32>(0xff800000u))));
                _l = (_l + _p_3);
                let _jj_3: i32 = (12i + _r);
                if ((_ka_3 != 0i)) {
                    {
                        _o_0 = (_o_0 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 272i)]));
                        _o_1 = (_o_1 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 273i)]));
                        _o_2 = (_o_2 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 274i)]));
                        _o_3 = (_o_3 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 275i)]));
                        _o_4 = (_o_4 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 276i)]));
                        _o_5 = (_o_5 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 277i)]));
                        _o_6 = (_o_6 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 278i)]));
                        _o_7 = (_o_7 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 279i)]));
                        _o_8 = (_o_8 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 280i)]));
                        _o_9 = (_o_9 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 281i)]));
                        _o_10 = (_o_10 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 282i)]));
                        _o_11 = (_o_11 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 283i)]));
                        _o_12 = (_o_12 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 284i)]));
                        _o_13 = (_o_13 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 285i)]));
                        _o_14 = (_o_14 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 286i)]));
                        _o_15 = (_o_15 + (vec4<f32>(_p_3) * _kv[((_jj_3 * 17i) + 287i)]));
                    }
                }
            }
            _m = _mt;
        }
    }
    _ml[_t] = _m;
    _ml[(_t + 128i)] = _l;
    _fk[_t] = _fa;
    _fk[(_t + 128i)] = _fn;
    workgroupBarrier();
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        _fa = min(_fa, _fk[((_q * 4i) + _x)]);
        _fn = min(_fn, _fk[(((_q * 4i) + _x) + 128i)]);
    }
    var _M: f32 = bitcast<f32>(0xff800000u);
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        _M = zyn_max_f32(_M, _ml[((_q * 4i) + _x)]);
    }
    var _L: f32 = 0.0f;
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        let _mx: f32 = _ml[((_q * 4i) + _x)];
        _L = (_L + (_ml[(((_q * 4i) + _x) + 128i)] * select(zyn_exp_f32((_mx - _M)), 0.0f, (_mx <= bitcast<f32>(0xff800000u)))));
    }
    let _f: f32 = select(zyn_exp_f32((_m - _M)), 0.0f, (_m <= bitcast<f32>(0xff800000u)));
    {
        _o_0 = (_o_0 * vec4<f32>(_f));
        _o_1 = (_o_1 * vec4<f32>(_f));
        _o_2 = (_o_2 * vec4<f32>(_f));
        _o_3 = (_o_3 * vec4<f32>(_f));
        _o_4 = (_o_4 * vec4<f32>(_f));
        _o_5 = (_o_5 * vec4<f32>(_f));
        _o_6 = (_o_6 * vec4<f32>(_f));
        _o_7 = (_o_7 * vec4<f32>(_f));
        _o_8 = (_o_8 * vec4<f32>(_f));
        _o_9 = (_o_9 * vec4<f32>(_f));
        _o_10 = (_o_10 * vec4<f32>(_f));
        _o_11 = (_o_11 * vec4<f32>(_f));
        _o_12 = (_o_12 * vec4<f32>(_f));
        _o_13 = (_o_13 * vec4<f32>(_f));
        _o_14 = (_o_14 * vec4<f32>(_f));
        _o_15 = (_o_15 * vec4<f32>(_f));
    }
    for (var _x: i32 = 1i; _x < 4i; _x++) {
        if ((_r == _x)) {
            {
                _kv[(_q * 16i)] = _o_0;
                _kv[((_q * 16i) + 1i)] = _o_1;
                _kv[((_q * 16i) + 2i)] = _o_2;
                _kv[((_q * 16i) + 3i)] = _o_3;
                _kv[((_q * 16i) + 4i)] = _o_4;
                _kv[((_q * 16i) + 5i)] = _o_5;
                _kv[((_q * 16i) + 6i)] = _o_6;
                _kv[((_q * 16i) + 7i)] = _o_7;
                _kv[((_q * 16i) + 8i)] = _o_8;
                _kv[((_q * 16i) + 9i)] = _o_9;
                _kv[((_q * 16i) + 10i)] = _o_10;
                _kv[((_q * 16i) + 11i)] = _o_11;
                _kv[((_q * 16i) + 12i)] = _o_12;
                _kv[((_q * 16i) + 13i)] = _o_13;
                _kv[((_q * 16i) + 14i)] = _o_14;
                _kv[((_q * 16i) + 15i)] = _o_15;
            }
        }
        workgroupBarrier();
        if ((_r == 0i)) {
            {
                _o_0 = (_o_0 + _kv[(_q * 16i)]);
                _o_1 = (_o_1 + _kv[((_q * 16i) + 1i)]);
                _o_2 = (_o_2 + _kv[((_q * 16i) + 2i)]);
                _o_3 = (_o_3 + _kv[((_q * 16i) + 3i)]);
                _o_4 = (_o_4 + _kv[((_q * 16i) + 4i)]);
                _o_5 = (_o_5 + _kv[((_q * 16i) + 5i)]);
                _o_6 = (_o_6 + _kv[((_q * 16i) + 6i)]);
                _o_7 = (_o_7 + _kv[((_q * 16i) + 7i)]);
                _o_8 = (_o_8 + _kv[((_q * 16i) + 8i)]);
                _o_9 = (_o_9 + _kv[((_q * 16i) + 9i)]);
                _o_10 = (_o_10 + _kv[((_q * 16i) + 10i)]);
                _o_11 = (_o_11 + _kv[((_q * 16i) + 11i)]);
                _o_12 = (_o_12 + _kv[((_q * 16i) + 12i)]);
                _o_13 = (_o_13 + _kv[((_q * 16i) + 13i)]);
                _o_14 = (_o_14 + _kv[((_q * 16i) + 14i)]);
                _o_15 = (_o_15 + _kv[((_q * 16i) + 15i)]);
            }
        }
        workgroupBarrier();
    }
    if (((_qi < _S) && (_r == 0i))) {
        let _inv: f32 = select((1.0f / _L), bitcast<f32>(0x7fc00000u), ((_fa < _fn) && ((_fn == _SK) || (_fn >= 64i))));
        {
            if ((0i < u_head_dim)) { u_out[_orow] = (_o_0[0] * _inv); }
            if ((1i < u_head_dim)) { u_out[(_orow + 1i)] = (_o_0[1] * _inv); }
            if ((2i < u_head_dim)) { u_out[(_orow + 2i)] = (_o_0[2] * _inv); }
            if ((3i < u_head_dim)) { u_out[(_orow + 3i)] = (_o_0[3] * _inv); }
            if ((4i < u_head_dim)) { u_out[(_orow + 4i)] = (_o_1[0] * _inv); }
            if ((5i < u_head_dim)) { u_out[(_orow + 5i)] = (_o_1[1] * _inv); }
            if ((6i < u_head_dim)) { u_out[(_orow + 6i)] = (_o_1[2] * _inv); }
            if ((7i < u_head_dim)) { u_out[(_orow + 7i)] = (_o_1[3] * _inv); }
            if ((8i < u_head_dim)) { u_out[(_orow + 8i)] = (_o_2[0] * _inv); }
            if ((9i < u_head_dim)) { u_out[(_orow + 9i)] = (_o_2[1] * _inv); }
            if ((10i < u_head_dim)) { u_out[(_orow + 10i)] = (_o_2[2] * _inv); }
            if ((11i < u_head_dim)) { u_out[(_orow + 11i)] = (_o_2[3] * _inv); }
            if ((12i < u_head_dim)) { u_out[(_orow + 12i)] = (_o_3[0] * _inv); }
            if ((13i < u_head_dim)) { u_out[(_orow + 13i)] = (_o_3[1] * _inv); }
            if ((14i < u_head_dim)) { u_out[(_orow + 14i)] = (_o_3[2] * _inv); }
            if ((15i < u_head_dim)) { u_out[(_orow + 15i)] = (_o_3[3] * _inv); }
            if ((16i < u_head_dim)) { u_out[(_orow + 16i)] = (_o_4[0] * _inv); }
            if ((17i < u_head_dim)) { u_out[(_orow + 17i)] = (_o_4[1] * _inv); }
            if ((18i < u_head_dim)) { u_out[(_orow + 18i)] = (_o_4[2] * _inv); }
            if ((19i < u_head_dim)) { u_out[(_orow + 19i)] = (_o_4[3] * _inv); }
            if ((20i < u_head_dim)) { u_out[(_orow + 20i)] = (_o_5[0] * _inv); }
            if ((21i < u_head_dim)) { u_out[(_orow + 21i)] = (_o_5[1] * _inv); }
            if ((22i < u_head_dim)) { u_out[(_orow + 22i)] = (_o_5[2] * _inv); }
            if ((23i < u_head_dim)) { u_out[(_orow + 23i)] = (_o_5[3] * _inv); }
            if ((24i < u_head_dim)) { u_out[(_orow + 24i)] = (_o_6[0] * _inv); }
            if ((25i < u_head_dim)) { u_out[(_orow + 25i)] = (_o_6[1] * _inv); }
            if ((26i < u_head_dim)) { u_out[(_orow + 26i)] = (_o_6[2] * _inv); }
            if ((27i < u_head_dim)) { u_out[(_orow + 27i)] = (_o_6[3] * _inv); }
            if ((28i < u_head_dim)) { u_out[(_orow + 28i)] = (_o_7[0] * _inv); }
            if ((29i < u_head_dim)) { u_out[(_orow + 29i)] = (_o_7[1] * _inv); }
            if ((30i < u_head_dim)) { u_out[(_orow + 30i)] = (_o_7[2] * _inv); }
            if ((31i < u_head_dim)) { u_out[(_orow + 31i)] = (_o_7[3] * _inv); }
            if ((32i < u_head_dim)) { u_out[(_orow + 32i)] = (_o_8[0] * _inv); }
            if ((33i < u_head_dim)) { u_out[(_orow + 33i)] = (_o_8[1] * _inv); }
            if ((34i < u_head_dim)) { u_out[(_orow + 34i)] = (_o_8[2] * _inv); }
            if ((35i < u_head_dim)) { u_out[(_orow + 35i)] = (_o_8[3] * _inv); }
            if ((36i < u_head_dim)) { u_out[(_orow + 36i)] = (_o_9[0] * _inv); }
            if ((37i < u_head_dim)) { u_out[(_orow + 37i)] = (_o_9[1] * _inv); }
            if ((38i < u_head_dim)) { u_out[(_orow + 38i)] = (_o_9[2] * _inv); }
            if ((39i < u_head_dim)) { u_out[(_orow + 39i)] = (_o_9[3] * _inv); }
            if ((40i < u_head_dim)) { u_out[(_orow + 40i)] = (_o_10[0] * _inv); }
            if ((41i < u_head_dim)) { u_out[(_orow + 41i)] = (_o_10[1] * _inv); }
            if ((42i < u_head_dim)) { u_out[(_orow + 42i)] = (_o_10[2] * _inv); }
            if ((43i < u_head_dim)) { u_out[(_orow + 43i)] = (_o_10[3] * _inv); }
            if ((44i < u_head_dim)) { u_out[(_orow + 44i)] = (_o_11[0] * _inv); }
            if ((45i < u_head_dim)) { u_out[(_orow + 45i)] = (_o_11[1] * _inv); }
            if ((46i < u_head_dim)) { u_out[(_orow + 46i)] = (_o_11[2] * _inv); }
            if ((47i < u_head_dim)) { u_out[(_orow + 47i)] = (_o_11[3] * _inv); }
            if ((48i < u_head_dim)) { u_out[(_orow + 48i)] = (_o_12[0] * _inv); }
            if ((49i < u_head_dim)) { u_out[(_orow + 49i)] = (_o_12[1] * _inv); }
            if ((50i < u_head_dim)) { u_out[(_orow + 50i)] = (_o_12[2] * _inv); }
            if ((51i < u_head_dim)) { u_out[(_orow + 51i)] = (_o_12[3] * _inv); }
            if ((52i < u_head_dim)) { u_out[(_orow + 52i)] = (_o_13[0] * _inv); }
            if ((53i < u_head_dim)) { u_out[(_orow + 53i)] = (_o_13[1] * _inv); }
            if ((54i < u_head_dim)) { u_out[(_orow + 54i)] = (_o_13[2] * _inv); }
            if ((55i < u_head_dim)) { u_out[(_orow + 55i)] = (_o_13[3] * _inv); }
            if ((56i < u_head_dim)) { u_out[(_orow + 56i)] = (_o_14[0] * _inv); }
            if ((57i < u_head_dim)) { u_out[(_orow + 57i)] = (_o_14[1] * _inv); }
            if ((58i < u_head_dim)) { u_out[(_orow + 58i)] = (_o_14[2] * _inv); }
            if ((59i < u_head_dim)) { u_out[(_orow + 59i)] = (_o_14[3] * _inv); }
            if ((60i < u_head_dim)) { u_out[(_orow + 60i)] = (_o_15[0] * _inv); }
            if ((61i < u_head_dim)) { u_out[(_orow + 61i)] = (_o_15[1] * _inv); }
            if ((62i < u_head_dim)) { u_out[(_orow + 62i)] = (_o_15[2] * _inv); }
            if ((63i < u_head_dim)) { u_out[(_orow + 63i)] = (_o_15[3] * _inv); }
        }
    }
}

// attention, head_dim up to 128: 16 queries per block, 4 threads each
@compute @workgroup_size(64)
fn zyn_k_flash_attention_d128(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_K_d0: i32 = zyn_p.u_K_d0;
    let u_K_d1: i32 = zyn_p.u_K_d1;
    let u_K_d2: i32 = zyn_p.u_K_d2;
    let u_K_d3: i32 = zyn_p.u_K_d3;
    let u_Q_d0: i32 = zyn_p.u_Q_d0;
    let u_Q_d1: i32 = zyn_p.u_Q_d1;
    let u_Q_d2: i32 = zyn_p.u_Q_d2;
    let u_Q_d3: i32 = zyn_p.u_Q_d3;
    let u_V_d0: i32 = zyn_p.u_V_d0;
    let u_V_d1: i32 = zyn_p.u_V_d1;
    let u_V_d2: i32 = zyn_p.u_V_d2;
    let u_V_d3: i32 = zyn_p.u_V_d3;
    let u_batch: i32 = zyn_p.u_batch;
    let u_head_dim: i32 = zyn_p.u_head_dim;
    let u_heads: i32 = zyn_p.u_heads;
    let u_seq_len: i32 = zyn_p.u_seq_len;
    // _kv: workgroup memory, declared above
    // _ml: workgroup memory, declared above
    // _fk: workgroup memory, declared above
    if (zyn_in((u_head_dim - 1i), 128i, 2i)) {
        if (zyn_in((u_Q_d3 - 1i), 128i, 1i)) {
            let _S: i32 = u_seq_len;
            let _SK: i32 = u_seq_len;
            let _nqb: i32 = zyn_tdiv((u_seq_len + 15i), 16i);
            let _bh: i32 = zyn_tdiv(zyn_block, _nqb);
            let _h: i32 = zyn_trem(_bh, u_heads);
            let _b: i32 = zyn_tdiv(_bh, u_heads);
            let _t: i32 = zyn_thread;
            let _q: i32 = zyn_tdiv(_t, 4i);
            let _r: i32 = zyn_trem(_t, 4i);
            let _qi: i32 = ((zyn_trem(zyn_block, _nqb) * 16i) + _q);
            let _qc: i32 = min(_qi, (_S - 1i));
            let _qrow: i32 = (((((_b * u_Q_d1) * u_Q_d2) * u_Q_d3) + ((_h * u_Q_d2) * u_Q_d3)) + (_qc * u_Q_d3));
            let _kbase: i32 = ((((_b * u_K_d1) * u_K_d2) * u_K_d3) + ((_h * u_K_d2) * u_K_d3));
            let _vbase: i32 = ((((_b * u_V_d1) * u_V_d2) * u_V_d3) + ((_h * u_V_d2) * u_V_d3));
            let _orow: i32 = (((((_b * u_heads) * u_seq_len) * u_head_dim) + ((_h * u_seq_len) * u_head_dim)) + (_qc * u_head_dim));
            let _scale: f32 = (1.0f / sqrt(f32(u_head_dim)));
            var _qr_0: vec4<f32>;
            var _qr_1: vec4<f32>;
            var _qr_2: vec4<f32>;
            var _qr_3: vec4<f32>;
            var _qr_4: vec4<f32>;
            var _qr_5: vec4<f32>;
            var _qr_6: vec4<f32>;
            var _qr_7: vec4<f32>;
            var _qr_8: vec4<f32>;
            var _qr_9: vec4<f32>;
            var _qr_10: vec4<f32>;
            var _qr_11: vec4<f32>;
            var _qr_12: vec4<f32>;
            var _qr_13: vec4<f32>;
            var _qr_14: vec4<f32>;
            var _qr_15: vec4<f32>;
            var _qr_16: vec4<f32>;
            var _qr_17: vec4<f32>;
            var _qr_18: vec4<f32>;
            var _qr_19: vec4<f32>;
            var _qr_20: vec4<f32>;
            var _qr_21: vec4<f32>;
            var _qr_22: vec4<f32>;
            var _qr_23: vec4<f32>;
            var _qr_24: vec4<f32>;
            var _qr_25: vec4<f32>;
            var _qr_26: vec4<f32>;
            var _qr_27: vec4<f32>;
            var _qr_28: vec4<f32>;
            var _qr_29: vec4<f32>;
            var _qr_30: vec4<f32>;
            var _qr_31: vec4<f32>;
            var _o_0: vec4<f32>;
            var _o_1: vec4<f32>;
            var _o_2: vec4<f32>;
            var _o_3: vec4<f32>;
            var _o_4: vec4<f32>;
            var _o_5: vec4<f32>;
            var _o_6: vec4<f32>;
            var _o_7: vec4<f32>;
            var _o_8: vec4<f32>;
            var _o_9: vec4<f32>;
            var _o_10: vec4<f32>;
            var _o_11: vec4<f32>;
            var _o_12: vec4<f32>;
            var _o_13: vec4<f32>;
            var _o_14: vec4<f32>;
            var _o_15: vec4<f32>;
            var _o_16: vec4<f32>;
            var _o_17: vec4<f32>;
            var _o_18: vec4<f32>;
            var _o_19: vec4<f32>;
            var _o_20: vec4<f32>;
            var _o_21: vec4<f32>;
            var _o_22: vec4<f32>;
            var _o_23: vec4<f32>;
            var _o_24: vec4<f32>;
            var _o_25: vec4<f32>;
            var _o_26: vec4<f32>;
            var _o_27: vec4<f32>;
            var _o_28: vec4<f32>;
            var _o_29: vec4<f32>;
            var _o_30: vec4<f32>;
            var _o_31: vec4<f32>;
            {
                _qr_0 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(0i, (u_Q_d3 - 1i)))], (0i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(1i, (u_Q_d3 - 1i)))], (1i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(2i, (u_Q_d3 - 1i)))], (2i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(3i, (u_Q_d3 - 1i)))], (3i < u_Q_d3))) * vec4<f32>(_scale));
                _o_0 = vec4<f32>(0.0f);
                _qr_1 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(4i, (u_Q_d3 - 1i)))], (4i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(5i, (u_Q_d3 - 1i)))], (5i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(6i, (u_Q_d3 - 1i)))], (6i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(7i, (u_Q_d3 - 1i)))], (7i < u_Q_d3))) * vec4<f32>(_scale));
                _o_1 = vec4<f32>(0.0f);
                _qr_2 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(8i, (u_Q_d3 - 1i)))], (8i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(9i, (u_Q_d3 - 1i)))], (9i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(10i, (u_Q_d3 - 1i)))], (10i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(11i, (u_Q_d3 - 1i)))], (11i < u_Q_d3))) * vec4<f32>(_scale));
                _o_2 = vec4<f32>(0.0f);
                _qr_3 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(12i, (u_Q_d3 - 1i)))], (12i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(13i, (u_Q_d3 - 1i)))], (13i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(14i, (u_Q_d3 - 1i)))], (14i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(15i, (u_Q_d3 - 1i)))], (15i < u_Q_d3))) * vec4<f32>(_scale));
                _o_3 = vec4<f32>(0.0f);
                _qr_4 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(16i, (u_Q_d3 - 1i)))], (16i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(17i, (u_Q_d3 - 1i)))], (17i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(18i, (u_Q_d3 - 1i)))], (18i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(19i, (u_Q_d3 - 1i)))], (19i < u_Q_d3))) * vec4<f32>(_scale));
                _o_4 = vec4<f32>(0.0f);
                _qr_5 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(20i, (u_Q_d3 - 1i)))], (20i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(21i, (u_Q_d3 - 1i)))], (21i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(22i, (u_Q_d3 - 1i)))], (22i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(23i, (u_Q_d3 - 1i)))], (23i < u_Q_d3))) * vec4<f32>(_scale));
                _o_5 = vec4<f32>(0.0f);
                _qr_6 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(24i, (u_Q_d3 - 1i)))], (24i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(25i, (u_Q_d3 - 1i)))], (25i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(26i, (u_Q_d3 - 1i)))], (26i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(27i, (u_Q_d3 - 1i)))], (27i < u_Q_d3))) * vec4<f32>(_scale));
                _o_6 = vec4<f32>(0.0f);
                _qr_7 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(28i, (u_Q_d3 - 1i)))], (28i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(29i, (u_Q_d3 - 1i)))], (29i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(30i, (u_Q_d3 - 1i)))], (30i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(31i, (u_Q_d3 - 1i)))], (31i < u_Q_d3))) * vec4<f32>(_scale));
                _o_7 = vec4<f32>(0.0f);
                _qr_8 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(32i, (u_Q_d3 - 1i)))], (32i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(33i, (u_Q_d3 - 1i)))], (33i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(34i, (u_Q_d3 - 1i)))], (34i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(35i, (u_Q_d3 - 1i)))], (35i < u_Q_d3))) * vec4<f32>(_scale));
                _o_8 = vec4<f32>(0.0f);
                _qr_9 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(36i, (u_Q_d3 - 1i)))], (36i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(37i, (u_Q_d3 - 1i)))], (37i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(38i, (u_Q_d3 - 1i)))], (38i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(39i, (u_Q_d3 - 1i)))], (39i < u_Q_d3))) * vec4<f32>(_scale));
                _o_9 = vec4<f32>(0.0f);
                _qr_10 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(40i, (u_Q_d3 - 1i)))], (40i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(41i, (u_Q_d3 - 1i)))], (41i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(42i, (u_Q_d3 - 1i)))], (42i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(43i, (u_Q_d3 - 1i)))], (43i < u_Q_d3))) * vec4<f32>(_scale));
                _o_10 = vec4<f32>(0.0f);
                _qr_11 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(44i, (u_Q_d3 - 1i)))], (44i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(45i, (u_Q_d3 - 1i)))], (45i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(46i, (u_Q_d3 - 1i)))], (46i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(47i, (u_Q_d3 - 1i)))], (47i < u_Q_d3))) * vec4<f32>(_scale));
                _o_11 = vec4<f32>(0.0f);
                _qr_12 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(48i, (u_Q_d3 - 1i)))], (48i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(49i, (u_Q_d3 - 1i)))], (49i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(50i, (u_Q_d3 - 1i)))], (50i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(51i, (u_Q_d3 - 1i)))], (51i < u_Q_d3))) * vec4<f32>(_scale));
                _o_12 = vec4<f32>(0.0f);
                _qr_13 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(52i, (u_Q_d3 - 1i)))], (52i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(53i, (u_Q_d3 - 1i)))], (53i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(54i, (u_Q_d3 - 1i)))], (54i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(55i, (u_Q_d3 - 1i)))], (55i < u_Q_d3))) * vec4<f32>(_scale));
                _o_13 = vec4<f32>(0.0f);
                _qr_14 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(56i, (u_Q_d3 - 1i)))], (56i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(57i, (u_Q_d3 - 1i)))], (57i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(58i, (u_Q_d3 - 1i)))], (58i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(59i, (u_Q_d3 - 1i)))], (59i < u_Q_d3))) * vec4<f32>(_scale));
                _o_14 = vec4<f32>(0.0f);
                _qr_15 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(60i, (u_Q_d3 - 1i)))], (60i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(61i, (u_Q_d3 - 1i)))], (61i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(62i, (u_Q_d3 - 1i)))], (62i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(63i, (u_Q_d3 - 1i)))], (63i < u_Q_d3))) * vec4<f32>(_scale));
                _o_15 = vec4<f32>(0.0f);
                _qr_16 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(64i, (u_Q_d3 - 1i)))], (64i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(65i, (u_Q_d3 - 1i)))], (65i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(66i, (u_Q_d3 - 1i)))], (66i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(67i, (u_Q_d3 - 1i)))], (67i < u_Q_d3))) * vec4<f32>(_scale));
                _o_16 = vec4<f32>(0.0f);
                _qr_17 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(68i, (u_Q_d3 - 1i)))], (68i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(69i, (u_Q_d3 - 1i)))], (69i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(70i, (u_Q_d3 - 1i)))], (70i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(71i, (u_Q_d3 - 1i)))], (71i < u_Q_d3))) * vec4<f32>(_scale));
                _o_17 = vec4<f32>(0.0f);
                _qr_18 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(72i, (u_Q_d3 - 1i)))], (72i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(73i, (u_Q_d3 - 1i)))], (73i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(74i, (u_Q_d3 - 1i)))], (74i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(75i, (u_Q_d3 - 1i)))], (75i < u_Q_d3))) * vec4<f32>(_scale));
                _o_18 = vec4<f32>(0.0f);
                _qr_19 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(76i, (u_Q_d3 - 1i)))], (76i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(77i, (u_Q_d3 - 1i)))], (77i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(78i, (u_Q_d3 - 1i)))], (78i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(79i, (u_Q_d3 - 1i)))], (79i < u_Q_d3))) * vec4<f32>(_scale));
                _o_19 = vec4<f32>(0.0f);
                _qr_20 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(80i, (u_Q_d3 - 1i)))], (80i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(81i, (u_Q_d3 - 1i)))], (81i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(82i, (u_Q_d3 - 1i)))], (82i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(83i, (u_Q_d3 - 1i)))], (83i < u_Q_d3))) * vec4<f32>(_scale));
                _o_20 = vec4<f32>(0.0f);
                _qr_21 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(84i, (u_Q_d3 - 1i)))], (84i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(85i, (u_Q_d3 - 1i)))], (85i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(86i, (u_Q_d3 - 1i)))], (86i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(87i, (u_Q_d3 - 1i)))], (87i < u_Q_d3))) * vec4<f32>(_scale));
                _o_21 = vec4<f32>(0.0f);
                _qr_22 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(88i, (u_Q_d3 - 1i)))], (88i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(89i, (u_Q_d3 - 1i)))], (89i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(90i, (u_Q_d3 - 1i)))], (90i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(91i, (u_Q_d3 - 1i)))], (91i < u_Q_d3))) * vec4<f32>(_scale));
                _o_22 = vec4<f32>(0.0f);
                _qr_23 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(92i, (u_Q_d3 - 1i)))], (92i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(93i, (u_Q_d3 - 1i)))], (93i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(94i, (u_Q_d3 - 1i)))], (94i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(95i, (u_Q_d3 - 1i)))], (95i < u_Q_d3))) * vec4<f32>(_scale));
                _o_23 = vec4<f32>(0.0f);
                _qr_24 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(96i, (u_Q_d3 - 1i)))], (96i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(97i, (u_Q_d3 - 1i)))], (97i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(98i, (u_Q_d3 - 1i)))], (98i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(99i, (u_Q_d3 - 1i)))], (99i < u_Q_d3))) * vec4<f32>(_scale));
                _o_24 = vec4<f32>(0.0f);
                _qr_25 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(100i, (u_Q_d3 - 1i)))], (100i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(101i, (u_Q_d3 - 1i)))], (101i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(102i, (u_Q_d3 - 1i)))], (102i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(103i, (u_Q_d3 - 1i)))], (103i < u_Q_d3))) * vec4<f32>(_scale));
                _o_25 = vec4<f32>(0.0f);
                _qr_26 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(104i, (u_Q_d3 - 1i)))], (104i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(105i, (u_Q_d3 - 1i)))], (105i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(106i, (u_Q_d3 - 1i)))], (106i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(107i, (u_Q_d3 - 1i)))], (107i < u_Q_d3))) * vec4<f32>(_scale));
                _o_26 = vec4<f32>(0.0f);
                _qr_27 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(108i, (u_Q_d3 - 1i)))], (108i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(109i, (u_Q_d3 - 1i)))], (109i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(110i, (u_Q_d3 - 1i)))], (110i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(111i, (u_Q_d3 - 1i)))], (111i < u_Q_d3))) * vec4<f32>(_scale));
                _o_27 = vec4<f32>(0.0f);
                _qr_28 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(112i, (u_Q_d3 - 1i)))], (112i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(113i, (u_Q_d3 - 1i)))], (113i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(114i, (u_Q_d3 - 1i)))], (114i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(115i, (u_Q_d3 - 1i)))], (115i < u_Q_d3))) * vec4<f32>(_scale));
                _o_28 = vec4<f32>(0.0f);
                _qr_29 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(116i, (u_Q_d3 - 1i)))], (116i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(117i, (u_Q_d3 - 1i)))], (117i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(118i, (u_Q_d3 - 1i)))], (118i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(119i, (u_Q_d3 - 1i)))], (119i < u_Q_d3))) * vec4<f32>(_scale));
                _o_29 = vec4<f32>(0.0f);
                _qr_30 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(120i, (u_Q_d3 - 1i)))], (120i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(121i, (u_Q_d3 - 1i)))], (121i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(122i, (u_Q_d3 - 1i)))], (122i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(123i, (u_Q_d3 - 1i)))], (123i < u_Q_d3))) * vec4<f32>(_scale));
                _o_30 = vec4<f32>(0.0f);
                _qr_31 = (vec4<f32>(select(0.0f, u_Q[(_qrow + min(124i, (u_Q_d3 - 1i)))], (124i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(125i, (u_Q_d3 - 1i)))], (125i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(126i, (u_Q_d3 - 1i)))], (126i < u_Q_d3)), select(0.0f, u_Q[(_qrow + min(127i, (u_Q_d3 - 1i)))], (127i < u_Q_d3))) * vec4<f32>(_scale));
                _o_31 = vec4<f32>(0.0f);
            }
            var _m: f32 = bitcast<f32>(0xff800000u);
            var _l: f32 = 0.0f;
            var _fa: i32 = _SK;
            var _fn: i32 = _SK;
            for (var _k0: i32 = 0i; _k0 < _SK; _k0 += 8i) {
                workgroupBarrier();
                for (var _e: i32 = _t; _e < 256i; _e += 64i) {
                    let _row: i32 = zyn_tdiv(_e, 32i);
                    let _col: i32 = zyn_trem(_e, 32i);
                    let _jf: i32 = min((_k0 + _row), (_SK - 1i));
                    if ((((_col * 4i) + 3i) < u_Q_d3)) {
                        _kv[((_row * 33i) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(u_K[((_kbase + (_jf * u_K_d3)) + (_col * 4i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 1i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 2i))], u_K[((_kbase + (_jf * u_K_d3)) + ((_col * 4i) + 3i))]), ((_k0 + _row) < _SK));
                    } else {
                        _kv[((_row * 33i) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min((_col * 4i), (u_Q_d3 - 1i)))], ((_col * 4i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 1i), (u_Q_d3 - 1i)))], (((_col * 4i) + 1i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 2i), (u_Q_d3 - 1i)))], (((_col * 4i) + 2i) < u_Q_d3)), select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(((_col * 4i) + 3i), (u_Q_d3 - 1i)))], (((_col * 4i) + 3i) < u_Q_d3))), ((_k0 + _row) < _SK));
                    }
                    if ((((_col * 4i) + 3i) < u_head_dim)) {
                        _kv[((264i + (_row * 33i)) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(u_V[((_vbase + (_jf * u_V_d3)) + (_col * 4i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 1i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 2i))], u_V[((_vbase + (_jf * u_V_d3)) + ((_col * 4i) + 3i))]), ((_k0 + _row) < _SK));
                    } else {
                        _kv[((264i + (_row * 33i)) + _col)] = select(vec4<f32>(0.0f), vec4<f32>(select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min((_col * 4i), (u_head_dim - 1i)))], ((_col * 4i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 1i), (u_head_dim - 1i)))], (((_col * 4i) + 1i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 2i), (u_head_dim - 1i)))], (((_col * 4i) + 2i) < u_head_dim)), select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(((_col * 4i) + 3i), (u_head_dim - 1i)))], (((_col * 4i) + 3i) < u_head_dim))), ((_k0 + _row) < _SK));
                    }
                }
                workgroupBarrier();
                {
                    var _s_0: f32;
                    var _s_1: f32;
                    var _ka_0: i32;
                    var _ka_1: i32;
                    var _mt: f32 = _m;
                    {
                        let _jj_0: i32 = _r;
                        let _j_0: i32 = (_k0 + _jj_0);
                        let _jc_0: i32 = min(_j_0, (_SK - 1i));
                        var _dot_0: f32 = dot(_qr_0, _kv[(_jj_0 * 33i)]);
                        {
                            _dot_0 = (_dot_0 + dot(_qr_1, _kv[((_jj_0 * 33i) + 1i)]));
                            _dot_0 = (_dot_0 + dot(_qr_2, _kv[((_jj_0 * 33i) + 2i)]));
                            _dot_0 = (_dot_0 + dot(_qr_3, _kv[((_jj_0 * 33i) + 3i)]));
                            _dot_0 = (_dot_0 + dot(_qr_4, _kv[((_jj_0 * 33i) + 4i)]));
                            _dot_0 = (_dot_0 + dot(_qr_5, _kv[((_jj_0 * 33i) + 5i)]));
                            _dot_0 = (_dot_0 + dot(_qr_6, _kv[((_jj_0 * 33i) + 6i)]));
                            _dot_0 = (_dot_0 + dot(_qr_7, _kv[((_jj_0 * 33i) + 7i)]));
                            _dot_0 = (_dot_0 + dot(_qr_8, _kv[((_jj_0 * 33i) + 8i)]));
                            _dot_0 = (_dot_0 + dot(_qr_9, _kv[((_jj_0 * 33i) + 9i)]));
                            _dot_0 = (_dot_0 + dot(_qr_10, _kv[((_jj_0 * 33i) + 10i)]));
                            _dot_0 = (_dot_0 + dot(_qr_11, _kv[((_jj_0 * 33i) + 11i)]));
                            _dot_0 = (_dot_0 + dot(_qr_12, _kv[((_jj_0 * 33i) + 12i)]));
                            _dot_0 = (_dot_0 + dot(_qr_13, _kv[((_jj_0 * 33i) + 13i)]));
                            _dot_0 = (_dot_0 + dot(_qr_14, _kv[((_jj_0 * 33i) + 14i)]));
                            _dot_0 = (_dot_0 + dot(_qr_15, _kv[((_jj_0 * 33i) + 15i)]));
                            _dot_0 = (_dot_0 + dot(_qr_16, _kv[((_jj_0 * 33i) + 16i)]));
                            _dot_0 = (_dot_0 + dot(_qr_17, _kv[((_jj_0 * 33i) + 17i)]));
                            _dot_0 = (_dot_0 + dot(_qr_18, _kv[((_jj_0 * 33i) + 18i)]));
                            _dot_0 = (_dot_0 + dot(_qr_19, _kv[((_jj_0 * 33i) + 19i)]));
                            _dot_0 = (_dot_0 + dot(_qr_20, _kv[((_jj_0 * 33i) + 20i)]));
                            _dot_0 = (_dot_0 + dot(_qr_21, _kv[((_jj_0 * 33i) + 21i)]));
                            _dot_0 = (_dot_0 + dot(_qr_22, _kv[((_jj_0 * 33i) + 22i)]));
                            _dot_0 = (_dot_0 + dot(_qr_23, _kv[((_jj_0 * 33i) + 23i)]));
                            _dot_0 = (_dot_0 + dot(_qr_24, _kv[((_jj_0 * 33i) + 24i)]));
                            _dot_0 = (_dot_0 + dot(_qr_25, _kv[((_jj_0 * 33i) + 25i)]));
                            _dot_0 = (_dot_0 + dot(_qr_26, _kv[((_jj_0 * 33i) + 26i)]));
                            _dot_0 = (_dot_0 + dot(_qr_27, _kv[((_jj_0 * 33i) + 27i)]));
                            _dot_0 = (_dot_0 + dot(_qr_28, _kv[((_jj_0 * 33i) + 28i)]));
                            _dot_0 = (_dot_0 + dot(_qr_29, _kv[((_jj_0 * 33i) + 29i)]));
                            _dot_0 = (_dot_0 + dot(_qr_30, _kv[((_jj_0 * 33i) + 30i)]));
                            _dot_0 = (_dot_0 + dot(_qr_31, _kv[((_jj_0 * 33i) + 31i)]));
                        }
                        let _ok_0: bool = (_j_0 < _SK);
                        let _sc_0: f32 = _dot_0;
                        _fa = select(_fa, min(_fa, _j_0), _ok_0);
                        _fn = select(_fn, min(_fn, _j_0), (_ok_0 && (!(_sc_0 <= bitcast<f32>(0xff800000u)))));
                        _ka_0 = select(0i, 1i, _ok_0);
                        _s_0 = select(bitcast<f32>(0xff800000u), _sc_0, _ok_0);
                        _mt = zyn_max_f32(_mt, _s_0);
                        let _jj_1: i32 = (4i + _r);
                        let _j_1: i32 = (_k0 + _jj_1);
                        let _jc_1: i32 = min(_j_1, (_SK - 1i));
                        var _dot_1: f32 = dot(_qr_0, _kv[(_jj_1 * 33i)]);
                        {
                            _dot_1 = (_dot_1 + dot(_qr_1, _kv[((_jj_1 * 33i) + 1i)]));
                            _dot_1 = (_dot_1 + dot(_qr_2, _kv[((_jj_1 * 33i) + 2i)]));
                            _dot_1 = (_dot_1 + dot(_qr_3, _kv[((_jj_1 * 33i) + 3i)]));
                            _dot_1 = (_dot_1 + dot(_qr_4, _kv[((_jj_1 * 33i) + 4i)]));
                            _dot_1 = (_dot_1 + dot(_qr_5, _kv[((_jj_1 * 33i) + 5i)]));
                            _dot_1 = (_dot_1 + dot(_qr_6, _kv[((_jj_1 * 33i) + 6i)]));
                            _dot_1 = (_dot_1 + dot(_qr_7, _kv[((_jj_1 * 33i) + 7i)]));
                            _dot_1 = (_dot_1 + dot(_qr_8, _kv[((_jj_1 * 33i) + 8i)]));
                            _dot_1 = (_dot_1 + dot(_qr_9, _kv[((_jj_1 * 33i) + 9i)]));
                            _dot_1 = (_dot_1 + dot(_qr_10, _kv[((_jj_1 * 33i) + 10i)]));
                            _dot_1 = (_dot_1 + dot(_qr_11, _kv[((_jj_1 * 33i) + 11i)]));
                            _dot_1 = (_dot_1 + dot(_qr_12, _kv[((_jj_1 * 33i) + 12i)]));
                            _dot_1 = (_dot_1 + dot(_qr_13, _kv[((_jj_1 * 33i) + 13i)]));
                            _dot_1 = (_dot_1 + dot(_qr_14, _kv[((_jj_1 * 33i) + 14i)]));
                            _dot_1 = (_dot_1 + dot(_qr_15, _kv[((_jj_1 * 33i) + 15i)]));
                            _dot_1 = (_dot_1 + dot(_qr_16, _kv[((_jj_1 * 33i) + 16i)]));
                            _dot_1 = (_dot_1 + dot(_qr_17, _kv[((_jj_1 * 33i) + 17i)]));
                            _dot_1 = (_dot_1 + dot(_qr_18, _kv[((_jj_1 * 33i) + 18i)]));
                            _dot_1 = (_dot_1 + dot(_qr_19, _kv[((_jj_1 * 33i) + 19i)]));
                            _dot_1 = (_dot_1 + dot(_qr_20, _kv[((_jj_1 * 33i) + 20i)]));
                            _dot_1 = (_dot_1 + dot(_qr_21, _kv[((_jj_1 * 33i) + 21i)]));
                            _dot_1 = (_dot_1 + dot(_qr_22, _kv[((_jj_1 * 33i) + 22i)]));
                            _dot_1 = (_dot_1 + dot(_qr_23, _kv[((_jj_1 * 33i) + 23i)]));
                            _dot_1 = (_dot_1 + dot(_qr_24, _kv[((_jj_1 * 33i) + 24i)]));
                            _dot_1 = (_dot_1 + dot(_qr_25, _kv[((_jj_1 * 33i) + 25i)]));
                            _dot_1 = (_dot_1 + dot(_qr_26, _kv[((_jj_1 * 33i) + 26i)]));
                            _dot_1 = (_dot_1 + dot(_qr_27, _kv[((_jj_1 * 33i) + 27i)]));
                            _dot_1 = (_dot_1 + dot(_qr_28, _kv[((_jj_1 * 33i) + 28i)]));
                            _dot_1 = (_dot_1 + dot(_qr_29, _kv[((_jj_1 * 33i) + 29i)]));
                            _dot_1 = (_dot_1 + dot(_qr_30, _kv[((_jj_1 * 33i) + 30i)]));
                            _dot_1 = (_dot_1 + dot(_qr_31, _kv[((_jj_1 * 33i) + 31i)]));
                        }
                        let _ok_1: bool = (_j_1 < _SK);
                        let _sc_1: f32 = _dot_1;
                        _fa = select(_fa, min(_fa, _j_1), _ok_1);
                        _fn = select(_fn, min(_fn, _j_1), (_ok_1 && (!(_sc_1 <= bitcast<f32>(0xff800000u)))));
                        _ka_1 = select(0i, 1i, _ok_1);
                        _s_1 = select(bitcast<f32>(0xff800000u), _sc_1, _ok_1);
                        _mt = zyn_max_f32(_mt, _s_1);
                    }
                    let _alpha: f32 = select(1.0f, zyn_exp_f32((_m - _mt)), (!(_mt <= bitcast<f32>(0xff800000u))));
                    _l = (_l * _alpha);
                    {
                        _o_0 = (_o_0 * vec4<f32>(_alpha));
                        _o_1 = (_o_1 * vec4<f32>(_alpha));
                        _o_2 = (_o_2 * vec4<f32>(_alpha));
                        _o_3 = (_o_3 * vec4<f32>(_alpha));
                        _o_4 = (_o_4 * vec4<f32>(_alpha));
                        _o_5 = (_o_5 * vec4<f32>(_alpha));
                        _o_6 = (_o_6 * vec4<f32>(_alpha));
                        _o_7 = (_o_7 * vec4<f32>(_alpha));
                        _o_8 = (_o_8 * vec4<f32>(_alpha));
                        _o_9 = (_o_9 * vec4<f32>(_alpha));
                        _o_10 = (_o_10 * vec4<f32>(_alpha));
                        _o_11 = (_o_11 * vec4<f32>(_alpha));
                        _o_12 = (_o_12 * vec4<f32>(_alpha));
                        _o_13 = (_o_13 * vec4<f32>(_alpha));
                        _o_14 = (_o_14 * vec4<f32>(_alpha));
                        _o_15 = (_o_15 * vec4<f32>(_alpha));
                        _o_16 = (_o_16 * vec4<f32>(_alpha));
                        _o_17 = (_o_17 * vec4<f32>(_alpha));
                        _o_18 = (_o_18 * vec4<f32>(_alpha));
                        _o_19 = (_o_19 * vec4<f32>(_alpha));
                        _o_20 = (_o_20 * vec4<f32>(_alpha));
                        _o_21 = (_o_21 * vec4<f32>(_alpha));
                        _o_22 = (_o_22 * vec4<f32>(_alpha));
                        _o_23 = (_o_23 * vec4<f32>(_alpha));
                        _o_24 = (_o_24 * vec4<f32>(_alpha));
                        _o_25 = (_o_25 * vec4<f32>(_alpha));
                        _o_26 = (_o_26 * vec4<f32>(_alpha));
                        _o_27 = (_o_27 * vec4<f32>(_alpha));
                        _o_28 = (_o_28 * vec4<f32>(_alpha));
                        _o_29 = (_o_29 * vec4<f32>(_alpha));
                        _o_30 = (_o_30 * vec4<f32>(_alpha));
                        _o_31 = (_o_31 * vec4<f32>(_alpha));
                    }
                    {
                        let _p_0: f32 = select(0.0f, zyn_exp_f32((_s_0 - _mt)), (!(_s_0 <= bitcast<f32>(0xff800000u))));
                        _l = (_l + _p_0);
                        let _jj_0: i32 = _r;
                        if ((_ka_0 != 0i)) {
                            {
                                _o_0 = (_o_0 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 264i)]));
                                _o_1 = (_o_1 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 265i)]));
                                _o_2 = (_o_2 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 266i)]));
                                _o_3 = (_o_3 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 267i)]));
                                _o_4 = (_o_4 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 268i)]));
                                _o_5 = (_o_5 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 269i)]));
                                _o_6 = (_o_6 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 270i)]));
                                _o_7 = (_o_7 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 271i)]));
                                _o_8 = (_o_8 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 272i)]));
                                _o_9 = (_o_9 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 273i)]));
                                _o_10 = (_o_10 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 274i)]));
                                _o_11 = (_o_11 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 275i)]));
                                _o_12 = (_o_12 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 276i)]));
                                _o_13 = (_o_13 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 277i)]));
                                _o_14 = (_o_14 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 278i)]));
                                _o_15 = (_o_15 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 279i)]));
                                _o_16 = (_o_16 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 280i)]));
                                _o_17 = (_o_17 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 281i)]));
                                _o_18 = (_o_18 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 282i)]));
                                _o_19 = (_o_19 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 283i)]));
                                _o_20 = (_o_20 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 284i)]));
                                _o_21 = (_o_21 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 285i)]));
                                _o_22 = (_o_22 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 286i)]));
                                _o_23 = (_o_23 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 287i)]));
                                _o_24 = (_o_24 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 288i)]));
                                _o_25 = (_o_25 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 289i)]));
                                _o_26 = (_o_26 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 290i)]));
                                _o_27 = (_o_27 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 291i)]));
                                _o_28 = (_o_28 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 292i)]));
                                _o_29 = (_o_29 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 293i)]));
                                _o_30 = (_o_30 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 294i)]));
                                _o_31 = (_o_31 + (vec4<f32>(_p_0) * _kv[((_jj_0 * 33i) + 295i)]));
                            }
                        }
                        let _p_1: f32 = select(0.0f, zyn_exp_f32((_s_1 - _mt)), (!(_s_1 <= bitcast<f32>(0xff800000u))));
                        _l = (_l + _p_1);
                        let _jj_1: i32 = (4i + _r);
                        if ((_ka_1 != 0i)) {
                            {
                                _o_0 = (_o_0 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 264i)]));
                                _o_1 = (_o_1 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 265i)]));
                                _o_2 = (_o_2 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 266i)]));
                                _o_3 = (_o_3 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 267i)]));
                                _o_4 = (_o_4 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 268i)]));
                                _o_5 = (_o_5 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 269i)]));
                                _o_6 = (_o_6 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 270i)]));
                                _o_7 = (_o_7 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 271i)]));
                                _o_8 = (_o_8 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 272i)]));
                                _o_9 = (_o_9 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 273i)]));
                                _o_10 = (_o_10 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 274i)]));
                                _o_11 = (_o_11 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 275i)]));
                                _o_12 = (_o_12 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 276i)]));
                                _o_13 = (_o_13 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 277i)]));
                                _o_14 = (_o_14 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 278i)]));
                                _o_15 = (_o_15 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 279i)]));
                                _o_16 = (_o_16 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 280i)]));
                                _o_17 = (_o_17 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 281i)]));
                                _o_18 = (_o_18 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 282i)]));
                                _o_19 = (_o_19 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 283i)]));
                                _o_20 = (_o_20 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 284i)]));
                                _o_21 = (_o_21 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 285i)]));
                                _o_22 = (_o_22 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 286i)]));
                                _o_23 = (_o_23 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 287i)]));
                                _o_24 = (_o_24 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 288i)]));
                                _o_25 = (_o_25 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 289i)]));
                                _o_26 = (_o_26 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 290i)]));
                                _o_27 = (_o_27 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 291i)]));
                                _o_28 = (_o_28 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 292i)]));
                                _o_29 = (_o_29 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 293i)]));
                                _o_30 = (_o_30 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 294i)]));
                                _o_31 = (_o_31 + (vec4<f32>(_p_1) * _kv[((_jj_1 * 33i) + 295i)]));
                            }
                        }
                    }
                    _m = _mt;
                }
            }
            _ml[_t] = _m;
            _ml[(_t + 64i)] = _l;
            _fk[_t] = _fa;
            _fk[(_t + 64i)] = _fn;
            workgroupBarrier();
            for (var _x: i32 = 0i; _x < 4i; _x++) {
                _fa = min(_fa, _fk[((_q * 4i) + _x)]);
                _fn = min(_fn, _fk[(((_q * 4i) + _x) + 64i)]);
            }
            var _M: f32 = bitcast<f32>(0xff800000u);
            for (var _x: i32 = 0i; _x < 4i; _x++) {
                _M = zyn_max_f32(_M, _ml[((_q * 4i) + _x)]);
            }
            var _L: f32 = 0.0f;
            for (var _x: i32 = 0i; _x < 4i; _x++) {
                let _mx: f32 = _ml[((_q * 4i) + _x)];
                _L = (_L + (_ml[(((_q * 4i) + _x) + 64i)] * select(zyn_exp_f32((_mx - _M)), 0.0f, (_mx <= bitcast<f32>(0xff800000u)))));
            }
            let _f: f32 = select(zyn_exp_f32((_m - _M)), 0.0f, (_m <= bitcast<f32>(0xff800000u)));
            {
                _o_0 = (_o_0 * vec4<f32>(_f));
                _o_1 = (_o_1 * vec4<f32>(_f));
                _o_2 = (_o_2 * vec4<f32>(_f));
                _o_3 = (_o_3 * vec4<f32>(_f));
                _o_4 = (_o_4 * vec4<f32>(_f));
                _o_5 = (_o_5 * vec4<f32>(_f));
                _o_6 = (_o_6 * vec4<f32>(_f));
                _o_7 = (_o_7 * vec4<f32>(_f));
                _o_8 = (_o_8 * vec4<f32>(_f));
                _o_9 = (_o_9 * vec4<f32>(_f));
                _o_10 = (_o_10 * vec4<f32>(_f));
                _o_11 = (_o_11 * vec4<f32>(_f));
                _o_12 = (_o_12 * vec4<f32>(_f));
                _o_13 = (_o_13 * vec4<f32>(_f));
                _o_14 = (_o_14 * vec4<f32>(_f));
                _o_15 = (_o_15 * vec4<f32>(_f));
                _o_16 = (_o_16 * vec4<f32>(_f));
                _o_17 = (_o_17 * vec4<f32>(_f));
                _o_18 = (_o_18 * vec4<f32>(_f));
                _o_19 = (_o_19 * vec4<f32>(_f));
                _o_20 = (_o_20 * vec4<f32>(_f));
                _o_21 = (_o_21 * vec4<f32>(_f));
                _o_22 = (_o_22 * vec4<f32>(_f));
                _o_23 = (_o_23 * vec4<f32>(_f));
                _o_24 = (_o_24 * vec4<f32>(_f));
                _o_25 = (_o_25 * vec4<f32>(_f));
                _o_26 = (_o_26 * vec4<f32>(_f));
                _o_27 = (_o_27 * vec4<f32>(_f));
                _o_28 = (_o_28 * vec4<f32>(_f));
                _o_29 = (_o_29 * vec4<f32>(_f));
                _o_30 = (_o_30 * vec4<f32>(_f));
                _o_31 = (_o_31 * vec4<f32>(_f));
            }
            for (var _x: i32 = 1i; _x < 4i; _x++) {
                if ((_r == _x)) {
                    {
                        _kv[(_q * 32i)] = _o_0;
                        _kv[((_q * 32i) + 1i)] = _o_1;
                        _kv[((_q * 32i) + 2i)] = _o_2;
                        _kv[((_q * 32i) + 3i)] = _o_3;
                        _kv[((_q * 32i) + 4i)] = _o_4;
                        _kv[((_q * 32i) + 5i)] = _o_5;
                        _kv[((_q * 32i) + 6i)] = _o_6;
                        _kv[((_q * 32i) + 7i)] = _o_7;
                        _kv[((_q * 32i) + 8i)] = _o_8;
                        _kv[((_q * 32i) + 9i)] = _o_9;
                        _kv[((_q * 32i) + 10i)] = _o_10;
                        _kv[((_q * 32i) + 11i)] = _o_11;
                        _kv[((_q * 32i) + 12i)] = _o_12;
                        _kv[((_q * 32i) + 13i)] = _o_13;
                        _kv[((_q * 32i) + 14i)] = _o_14;
                        _kv[((_q * 32i) + 15i)] = _o_15;
                        _kv[((_q * 32i) + 16i)] = _o_16;
                        _kv[((_q * 32i) + 17i)] = _o_17;
                        _kv[((_q * 32i) + 18i)] = _o_18;
                        _kv[((_q * 32i) + 19i)] = _o_19;
                        _kv[((_q * 32i) + 20i)] = _o_20;
                        _kv[((_q * 32i) + 21i)] = _o_21;
                        _kv[((_q * 32i) + 22i)] = _o_22;
                        _kv[((_q * 32i) + 23i)] = _o_23;
                        _kv[((_q * 32i) + 24i)] = _o_24;
                        _kv[((_q * 32i) + 25i)] = _o_25;
                        _kv[((_q * 32i) + 26i)] = _o_26;
                        _kv[((_q * 32i) + 27i)] = _o_27;
                        _kv[((_q * 32i) + 28i)] = _o_28;
                        _kv[((_q * 32i) + 29i)] = _o_29;
                        _kv[((_q * 32i) + 30i)] = _o_30;
                        _kv[((_q * 32i) + 31i)] = _o_31;
                    }
                }
                workgroupBarrier();
                if ((_r == 0i)) {
                    {
                        _o_0 = (_o_0 + _kv[(_q * 32i)]);
                        _o_1 = (_o_1 + _kv[((_q * 32i) + 1i)]);
                        _o_2 = (_o_2 + _kv[((_q * 32i) + 2i)]);
                        _o_3 = (_o_3 + _kv[((_q * 32i) + 3i)]);
                        _o_4 = (_o_4 + _kv[((_q * 32i) + 4i)]);
                        _o_5 = (_o_5 + _kv[((_q * 32i) + 5i)]);
                        _o_6 = (_o_6 + _kv[((_q * 32i) + 6i)]);
                        _o_7 = (_o_7 + _kv[((_q * 32i) + 7i)]);
                        _o_8 = (_o_8 + _kv[((_q * 32i) + 8i)]);
                        _o_9 = (_o_9 + _kv[((_q * 32i) + 9i)]);
                        _o_10 = (_o_10 + _kv[((_q * 32i) + 10i)]);
                        _o_11 = (_o_11 + _kv[((_q * 32i) + 11i)]);
                        _o_12 = (_o_12 + _kv[((_q * 32i) + 12i)]);
                        _o_13 = (_o_13 + _kv[((_q * 32i) + 13i)]);
                        _o_14 = (_o_14 + _kv[((_q * 32i) + 14i)]);
                        _o_15 = (_o_15 + _kv[((_q * 32i) + 15i)]);
                        _o_16 = (_o_16 + _kv[((_q * 32i) + 16i)]);
                        _o_17 = (_o_17 + _kv[((_q * 32i) + 17i)]);
                        _o_18 = (_o_18 + _kv[((_q * 32i) + 18i)]);
                        _o_19 = (_o_19 + _kv[((_q * 32i) + 19i)]);
                        _o_20 = (_o_20 + _kv[((_q * 32i) + 20i)]);
                        _o_21 = (_o_21 + _kv[((_q * 32i) + 21i)]);
                        _o_22 = (_o_22 + _kv[((_q * 32i) + 22i)]);
                        _o_23 = (_o_23 + _kv[((_q * 32i) + 23i)]);
                        _o_24 = (_o_24 + _kv[((_q * 32i) + 24i)]);
                        _o_25 = (_o_25 + _kv[((_q * 32i) + 25i)]);
                        _o_26 = (_o_26 + _kv[((_q * 32i) + 26i)]);
                        _o_27 = (_o_27 + _kv[((_q * 32i) + 27i)]);
                        _o_28 = (_o_28 + _kv[((_q * 32i) + 28i)]);
                        _o_29 = (_o_29 + _kv[((_q * 32i) + 29i)]);
                        _o_30 = (_o_30 + _kv[((_q * 32i) + 30i)]);
                        _o_31 = (_o_31 + _kv[((_q * 32i) + 31i)]);
                    }
                }
                workgroupBarrier();
            }
            if (((_qi < _S) && (_r == 0i))) {
                let _inv: f32 = select((1.0f / _L), bitcast<f32>(0x7fc00000u), ((_fa < _fn) && ((_fn == _SK) || (_fn >= 64i))));
                {
                    if ((0i < u_head_dim)) { u_out[_orow] = (_o_0[0] * _inv); }
                    if ((1i < u_head_dim)) { u_out[(_orow + 1i)] = (_o_0[1] * _inv); }
                    if ((2i < u_head_dim)) { u_out[(_orow + 2i)] = (_o_0[2] * _inv); }
                    if ((3i < u_head_dim)) { u_out[(_orow + 3i)] = (_o_0[3] * _inv); }
                    if ((4i < u_head_dim)) { u_out[(_orow + 4i)] = (_o_1[0] * _inv); }
                    if ((5i < u_head_dim)) { u_out[(_orow + 5i)] = (_o_1[1] * _inv); }
                    if ((6i < u_head_dim)) { u_out[(_orow + 6i)] = (_o_1[2] * _inv); }
                    if ((7i < u_head_dim)) { u_out[(_orow + 7i)] = (_o_1[3] * _inv); }
                    if ((8i < u_head_dim)) { u_out[(_orow + 8i)] = (_o_2[0] * _inv); }
                    if ((9i < u_head_dim)) { u_out[(_orow + 9i)] = (_o_2[1] * _inv); }
                    if ((10i < u_head_dim)) { u_out[(_orow + 10i)] = (_o_2[2] * _inv); }
                    if ((11i < u_head_dim)) { u_out[(_orow + 11i)] = (_o_2[3] * _inv); }
                    if ((12i < u_head_dim)) { u_out[(_orow + 12i)] = (_o_3[0] * _inv); }
                    if ((13i < u_head_dim)) { u_out[(_orow + 13i)] = (_o_3[1] * _inv); }
                    if ((14i < u_head_dim)) { u_out[(_orow + 14i)] = (_o_3[2] * _inv); }
                    if ((15i < u_head_dim)) { u_out[(_orow + 15i)] = (_o_3[3] * _inv); }
                    if ((16i < u_head_dim)) { u_out[(_orow + 16i)] = (_o_4[0] * _inv); }
                    if ((17i < u_head_dim)) { u_out[(_orow + 17i)] = (_o_4[1] * _inv); }
                    if ((18i < u_head_dim)) { u_out[(_orow + 18i)] = (_o_4[2] * _inv); }
                    if ((19i < u_head_dim)) { u_out[(_orow + 19i)] = (_o_4[3] * _inv); }
                    if ((20i < u_head_dim)) { u_out[(_orow + 20i)] = (_o_5[0] * _inv); }
                    if ((21i < u_head_dim)) { u_out[(_orow + 21i)] = (_o_5[1] * _inv); }
                    if ((22i < u_head_dim)) { u_out[(_orow + 22i)] = (_o_5[2] * _inv); }
                    if ((23i < u_head_dim)) { u_out[(_orow + 23i)] = (_o_5[3] * _inv); }
                    if ((24i < u_head_dim)) { u_out[(_orow + 24i)] = (_o_6[0] * _inv); }
                    if ((25i < u_head_dim)) { u_out[(_orow + 25i)] = (_o_6[1] * _inv); }
                    if ((26i < u_head_dim)) { u_out[(_orow + 26i)] = (_o_6[2] * _inv); }
                    if ((27i < u_head_dim)) { u_out[(_orow + 27i)] = (_o_6[3] * _inv); }
                    if ((28i < u_head_dim)) { u_out[(_orow + 28i)] = (_o_7[0] * _inv); }
                    if ((29i < u_head_dim)) { u_out[(_orow + 29i)] = (_o_7[1] * _inv); }
                    if ((30i < u_head_dim)) { u_out[(_orow + 30i)] = (_o_7[2] * _inv); }
                    if ((31i < u_head_dim)) { u_out[(_orow + 31i)] = (_o_7[3] * _inv); }
                    if ((32i < u_head_dim)) { u_out[(_orow + 32i)] = (_o_8[0] * _inv); }
                    if ((33i < u_head_dim)) { u_out[(_orow + 33i)] = (_o_8[1] * _inv); }
                    if ((34i < u_head_dim)) { u_out[(_orow + 34i)] = (_o_8[2] * _inv); }
                    if ((35i < u_head_dim)) { u_out[(_orow + 35i)] = (_o_8[3] * _inv); }
                    if ((36i < u_head_dim)) { u_out[(_orow + 36i)] = (_o_9[0] * _inv); }
                    if ((37i < u_head_dim)) { u_out[(_orow + 37i)] = (_o_9[1] * _inv); }
                    if ((38i < u_head_dim)) { u_out[(_orow + 38i)] = (_o_9[2] * _inv); }
                    if ((39i < u_head_dim)) { u_out[(_orow + 39i)] = (_o_9[3] * _inv); }
                    if ((40i < u_head_dim)) { u_out[(_orow + 40i)] = (_o_10[0] * _inv); }
                    if ((41i < u_head_dim)) { u_out[(_orow + 41i)] = (_o_10[1] * _inv); }
                    if ((42i < u_head_dim)) { u_out[(_orow + 42i)] = (_o_10[2] * _inv); }
                    if ((43i < u_head_dim)) { u_out[(_orow + 43i)] = (_o_10[3] * _inv); }
                    if ((44i < u_head_dim)) { u_out[(_orow + 44i)] = (_o_11[0] * _inv); }
                    if ((45i < u_head_dim)) { u_out[(_orow + 45i)] = (_o_11[1] * _inv); }
                    if ((46i < u_head_dim)) { u_out[(_orow + 46i)] = (_o_11[2] * _inv); }
                    if ((47i < u_head_dim)) { u_out[(_orow + 47i)] = (_o_11[3] * _inv); }
                    if ((48i < u_head_dim)) { u_out[(_orow + 48i)] = (_o_12[0] * _inv); }
                    if ((49i < u_head_dim)) { u_out[(_orow + 49i)] = (_o_12[1] * _inv); }
                    if ((50i < u_head_dim)) { u_out[(_orow + 50i)] = (_o_12[2] * _inv); }
                    if ((51i < u_head_dim)) { u_out[(_orow + 51i)] = (_o_12[3] * _inv); }
                    if ((52i < u_head_dim)) { u_out[(_orow + 52i)] = (_o_13[0] * _inv); }
                    if ((53i < u_head_dim)) { u_out[(_orow + 53i)] = (_o_13[1] * _inv); }
                    if ((54i < u_head_dim)) { u_out[(_orow + 54i)] = (_o_13[2] * _inv); }
                    if ((55i < u_head_dim)) { u_out[(_orow + 55i)] = (_o_13[3] * _inv); }
                    if ((56i < u_head_dim)) { u_out[(_orow + 56i)] = (_o_14[0] * _inv); }
                    if ((57i < u_head_dim)) { u_out[(_orow + 57i)] = (_o_14[1] * _inv); }
                    if ((58i < u_head_dim)) { u_out[(_orow + 58i)] = (_o_14[2] * _inv); }
                    if ((59i < u_head_dim)) { u_out[(_orow + 59i)] = (_o_14[3] * _inv); }
                    if ((60i < u_head_dim)) { u_out[(_orow + 60i)] = (_o_15[0] * _inv); }
                    if ((61i < u_head_dim)) { u_out[(_orow + 61i)] = (_o_15[1] * _inv); }
                    if ((62i < u_head_dim)) { u_out[(_orow + 62i)] = (_o_15[2] * _inv); }
                    if ((63i < u_head_dim)) { u_out[(_orow + 63i)] = (_o_15[3] * _inv); }
                    if ((64i < u_head_dim)) { u_out[(_orow + 64i)] = (_o_16[0] * _inv); }
                    if ((65i < u_head_dim)) { u_out[(_orow + 65i)] = (_o_16[1] * _inv); }
                    if ((66i < u_head_dim)) { u_out[(_orow + 66i)] = (_o_16[2] * _inv); }
                    if ((67i < u_head_dim)) { u_out[(_orow + 67i)] = (_o_16[3] * _inv); }
                    if ((68i < u_head_dim)) { u_out[(_orow + 68i)] = (_o_17[0] * _inv); }
                    if ((69i < u_head_dim)) { u_out[(_orow + 69i)] = (_o_17[1] * _inv); }
                    if ((70i < u_head_dim)) { u_out[(_orow + 70i)] = (_o_17[2] * _inv); }
                    if ((71i < u_head_dim)) { u_out[(_orow + 71i)] = (_o_17[3] * _inv); }
                    if ((72i < u_head_dim)) { u_out[(_orow + 72i)] = (_o_18[0] * _inv); }
                    if ((73i < u_head_dim)) { u_out[(_orow + 73i)] = (_o_18[1] * _inv); }
                    if ((74i < u_head_dim)) { u_out[(_orow + 74i)] = (_o_18[2] * _inv); }
                    if ((75i < u_head_dim)) { u_out[(_orow + 75i)] = (_o_18[3] * _inv); }
                    if ((76i < u_head_dim)) { u_out[(_orow + 76i)] = (_o_19[0] * _inv); }
                    if ((77i < u_head_dim)) { u_out[(_orow + 77i)] = (_o_19[1] * _inv); }
                    if ((78i < u_head_dim)) { u_out[(_orow + 78i)] = (_o_19[2] * _inv); }
                    if ((79i < u_head_dim)) { u_out[(_orow + 79i)] = (_o_19[3] * _inv); }
                    if ((80i < u_head_dim)) { u_out[(_orow + 80i)] = (_o_20[0] * _inv); }
                    if ((81i < u_head_dim)) { u_out[(_orow + 81i)] = (_o_20[1] * _inv); }
                    if ((82i < u_head_dim)) { u_out[(_orow + 82i)] = (_o_20[2] * _inv); }
                    if ((83i < u_head_dim)) { u_out[(_orow + 83i)] = (_o_20[3] * _inv); }
                    if ((84i < u_head_dim)) { u_out[(_orow + 84i)] = (_o_21[0] * _inv); }
                    if ((85i < u_head_dim)) { u_out[(_orow + 85i)] = (_o_21[1] * _inv); }
                    if ((86i < u_head_dim)) { u_out[(_orow + 86i)] = (_o_21[2] * _inv); }
                    if ((87i < u_head_dim)) { u_out[(_orow + 87i)] = (_o_21[3] * _inv); }
                    if ((88i < u_head_dim)) { u_out[(_orow + 88i)] = (_o_22[0] * _inv); }
                    if ((89i < u_head_dim)) { u_out[(_orow + 89i)] = (_o_22[1] * _inv); }
                    if ((90i < u_head_dim)) { u_out[(_orow + 90i)] = (_o_22[2] * _inv); }
                    if ((91i < u_head_dim)) { u_out[(_orow + 91i)] = (_o_22[3] * _inv); }
                    if ((92i < u_head_dim)) { u_out[(_orow + 92i)] = (_o_23[0] * _inv); }
                    if ((93i < u_head_dim)) { u_out[(_orow + 93i)] = (_o_23[1] * _inv); }
                    if ((94i < u_head_dim)) { u_out[(_orow + 94i)] = (_o_23[2] * _inv); }
                    if ((95i < u_head_dim)) { u_out[(_orow + 95i)] = (_o_23[3] * _inv); }
                    if ((96i < u_head_dim)) { u_out[(_orow + 96i)] = (_o_24[0] * _inv); }
                    if ((97i < u_head_dim)) { u_out[(_orow + 97i)] = (_o_24[1] * _inv); }
                    if ((98i < u_head_dim)) { u_out[(_orow + 98i)] = (_o_24[2] * _inv); }
                    if ((99i < u_head_dim)) { u_out[(_orow + 99i)] = (_o_24[3] * _inv); }
                    if ((100i < u_head_dim)) { u_out[(_orow + 100i)] = (_o_25[0] * _inv); }
                    if ((101i < u_head_dim)) { u_out[(_orow + 101i)] = (_o_25[1] * _inv); }
                    if ((102i < u_head_dim)) { u_out[(_orow + 102i)] = (_o_25[2] * _inv); }
                    if ((103i < u_head_dim)) { u_out[(_orow + 103i)] = (_o_25[3] * _inv); }
                    if ((104i < u_head_dim)) { u_out[(_orow + 104i)] = (_o_26[0] * _inv); }
                    if ((105i < u_head_dim)) { u_out[(_orow + 105i)] = (_o_26[1] * _inv); }
                    if ((106i < u_head_dim)) { u_out[(_orow + 106i)] = (_o_26[2] * _inv); }
                    if ((107i < u_head_dim)) { u_out[(_orow + 107i)] = (_o_26[3] * _inv); }
                    if ((108i < u_head_dim)) { u_out[(_orow + 108i)] = (_o_27[0] * _inv); }
                    if ((109i < u_head_dim)) { u_out[(_orow + 109i)] = (_o_27[1] * _inv); }
                    if ((110i < u_head_dim)) { u_out[(_orow + 110i)] = (_o_27[2] * _inv); }
                    if ((111i < u_head_dim)) { u_out[(_orow + 111i)] = (_o_27[3] * _inv); }
                    if ((112i < u_head_dim)) { u_out[(_orow + 112i)] = (_o_28[0] * _inv); }
                    if ((113i < u_head_dim)) { u_out[(_orow + 113i)] = (_o_28[1] * _inv); }
                    if ((114i < u_head_dim)) { u_out[(_orow + 114i)] = (_o_28[2] * _inv); }
                    if ((115i < u_head_dim)) { u_out[(_orow + 115i)] = (_o_28[3] * _inv); }
                    if ((116i < u_head_dim)) { u_out[(_orow + 116i)] = (_o_29[0] * _inv); }
                    if ((117i < u_head_dim)) { u_out[(_orow + 117i)] = (_o_29[1] * _inv); }
                    if ((118i < u_head_dim)) { u_out[(_orow + 118i)] = (_o_29[2] * _inv); }
                    if ((119i < u_head_dim)) { u_out[(_orow + 119i)] = (_o_29[3] * _inv); }
                    if ((120i < u_head_dim)) { u_out[(_orow + 120i)] = (_o_30[0] * _inv); }
                    if ((121i < u_head_dim)) { u_out[(_orow + 121i)] = (_o_30[1] * _inv); }
                    if ((122i < u_head_dim)) { u_out[(_orow + 122i)] = (_o_30[2] * _inv); }
                    if ((123i < u_head_dim)) { u_out[(_orow + 123i)] = (_o_30[3] * _inv); }
                    if ((124i < u_head_dim)) { u_out[(_orow + 124i)] = (_o_31[0] * _inv); }
                    if ((125i < u_head_dim)) { u_out[(_orow + 125i)] = (_o_31[1] * _inv); }
                    if ((126i < u_head_dim)) { u_out[(_orow + 126i)] = (_o_31[2] * _inv); }
                    if ((127i < u_head_dim)) { u_out[(_orow + 127i)] = (_o_31[3] * _inv); }
                }
            }
        }
    }
}

