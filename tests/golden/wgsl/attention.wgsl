// ZynBook WGSL for kernel `attention` (masked attention (three passes): 4 threads per query, K/V tiles in shared memory, online softmax in registers, the lanes merged in shared memory (head_dim up to 32: 32 queries x 32-key tiles, 8 keys per step; head_dim up to 64: 32 queries x 16-key tiles, 4 keys per step; head_dim up to 128: 16 queries x 8-key tiles, 2 keys per step) (attention: block_q=32, block_kv=32, lanes=4, chunk=8, tiles=True, products=False))

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
    u_mask_d0: i32,
    u_mask_d1: i32,
    u_seq_len: i32,
}

@group(0) @binding(0) var<storage, read> u_Q: array<f32>;
@group(0) @binding(1) var<storage, read> u_K: array<f32>;
@group(0) @binding(2) var<storage, read> u_V: array<f32>;
@group(0) @binding(3) var<storage, read> u_mask: array<u32>;  // bool
@group(0) @binding(4) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> zyn_err: array<atomic<i32>>;
@group(0) @binding(6) var<uniform> zyn_p: ZynParams;

var<workgroup> _kv: array<f32, 2112>;
var<workgroup> _ml: array<f32, 256>;

// signed division and remainder truncating as C, through unsigned ones
fn zyn_tdiv(a: i32, b: i32) -> i32 {
    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));
    return select(q, -q, (a < 0i) != (b < 0i)); }
fn zyn_trem(a: i32, b: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(abs(a)) % bitcast<u32>(abs(b)));
    return select(r, -r, a < 0i); }
// on the bits: a shader compiler may assume x == x
fn zyn_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// max and min propagate NaN, as numpy's maximum and minimum do
fn zyn_max_f32(a: f32, b: f32) -> f32 {
    if (zyn_isnan_f32(a)) { return a; } if (zyn_isnan_f32(b)) { return b; } return max(a, b); }
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
fn zyn_k_attention_d32(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
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
    let u_mask_d0: i32 = zyn_p.u_mask_d0;
    let u_mask_d1: i32 = zyn_p.u_mask_d1;
    let u_seq_len: i32 = zyn_p.u_seq_len;
    // _kv: workgroup memory, declared above
    // _ml: workgroup memory, declared above
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
    var _qr: array<f32, 32>;
    var _o: array<f32, 32>;
    for (var _d: i32 = 0i; _d < 32i; _d++) {
        _qr[_d] = (select(0.0f, u_Q[(_qrow + min(_d, (u_head_dim - 1i)))], (_d < u_head_dim)) * _scale);
        _o[_d] = 0.0f;
    }
    var _m: f32 = bitcast<f32>(0xff800000u);
    var _l: f32 = 0.0f;
    for (var _k0: i32 = 0i; _k0 < _SK; _k0 += 32i) {
        workgroupBarrier();
        for (var _e: i32 = _t; _e < 1024i; _e += 128i) {
            let _row: i32 = zyn_tdiv(_e, 32i);
            let _col: i32 = zyn_trem(_e, 32i);
            let _jf: i32 = min((_k0 + _row), (_SK - 1i));
            _kv[((_row * 33i) + _col)] = select(0.0f, select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(_col, (u_head_dim - 1i)))], (_col < u_head_dim)), ((_k0 + _row) < _SK));
            _kv[(((_row * 33i) + _col) + 1056i)] = select(0.0f, select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(_col, (u_head_dim - 1i)))], (_col < u_head_dim)), ((_k0 + _row) < _SK));
        }
        workgroupBarrier();
        for (var _j0: i32 = 0i; _j0 < 32i; _j0 += 32i) {
            var _s: array<f32, 8>;
            var _mt: f32 = _m;
            for (var _u: i32 = 0i; _u < 8i; _u++) {
                let _jj: i32 = ((_j0 + (_u * 4i)) + _r);
                let _j: i32 = (_k0 + _jj);
                let _jc: i32 = min(_j, (_SK - 1i));
                var _dot: f32 = 0.0f;
                for (var _d: i32 = 0i; _d < 32i; _d++) {
                    _dot = (_dot + (_qr[_d] * _kv[((_jj * 33i) + _d)]));
                }
                _s[_u] = select(bitcast<f32>(0xff800000u), _dot, ((_j < _SK) && (u_mask[((_qc * u_mask_d1) + _jc)] != 0u)));
                _mt = zyn_max_f32(_mt, _s[_u]);
            }
            if ((!(_mt <= bitcast<f32>(0xff800000u)))) {
                let _alpha: f32 = exp((_m - _mt));
                _l = (_l * _alpha);
                for (var _d: i32 = 0i; _d < 32i; _d++) {
                    _o[_d] = (_o[_d] * _alpha);
                }
                for (var _u: i32 = 0i; _u < 8i; _u++) {
                    let _p: f32 = select(0.0f, exp((_s[_u] - _mt)), (!(_s[_u] <= bitcast<f32>(0xff800000u))));
                    _l = (_l + _p);
                    let _jj: i32 = ((_j0 + (_u * 4i)) + _r);
                    for (var _d: i32 = 0i; _d < 32i; _d++) {
                        _o[_d] = (_o[_d] + (_p * _kv[(((_jj * 33i) + _d) + 1056i)]));
                    }
                }
                _m = _mt;
            }
        }
    }
    _ml[_t] = _m;
    _ml[(_t + 128i)] = _l;
    workgroupBarrier();
    var _M: f32 = bitcast<f32>(0xff800000u);
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        _M = zyn_max_f32(_M, _ml[((_q * 4i) + _x)]);
    }
    var _L: f32 = 0.0f;
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        let _mx: f32 = _ml[((_q * 4i) + _x)];
        _L = (_L + (_ml[(((_q * 4i) + _x) + 128i)] * select(exp((_mx - _M)), 0.0f, (_mx <= bitcast<f32>(0xff800000u)))));
    }
    let _f: f32 = select(exp((_m - _M)), 0.0f, (_m <= bitcast<f32>(0xff800000u)));
    for (var _d: i32 = 0i; _d < 32i; _d++) {
        _o[_d] = (_o[_d] * _f);
    }
    for (var _x: i32 = 1i; _x < 4i; _x++) {
        if ((_r == _x)) {
            for (var _d: i32 = 0i; _d < 32i; _d++) {
                _kv[((_q * 32i) + _d)] = _o[_d];
            }
        }
        workgroupBarrier();
        if ((_r == 0i)) {
            for (var _d: i32 = 0i; _d < 32i; _d++) {
                _o[_d] = (_o[_d] + _kv[((_q * 32i) + _d)]);
            }
        }
        workgroupBarrier();
    }
    if (((_qi < _S) && (_r == 0i))) {
        let _inv: f32 = select((1.0f / _L), 0.0f, (_L == 0.0f));
        for (var _d: i32 = 0i; _d < 32i; _d++) {
            if ((_d < u_head_dim)) { u_out[(_orow + _d)] = (_o[_d] * _inv); }
        }
    }
}

// attention, head_dim up to 64: 32 queries per block, 4 threads each
@compute @workgroup_size(128)
fn zyn_k_attention_d64(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
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
    let u_mask_d0: i32 = zyn_p.u_mask_d0;
    let u_mask_d1: i32 = zyn_p.u_mask_d1;
    let u_seq_len: i32 = zyn_p.u_seq_len;
    // _kv: workgroup memory, declared above
    // _ml: workgroup memory, declared above
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
    var _qr: array<f32, 64>;
    var _o: array<f32, 64>;
    for (var _d: i32 = 0i; _d < 64i; _d++) {
        _qr[_d] = (select(0.0f, u_Q[(_qrow + min(_d, (u_head_dim - 1i)))], (_d < u_head_dim)) * _scale);
        _o[_d] = 0.0f;
    }
    var _m: f32 = bitcast<f32>(0xff800000u);
    var _l: f32 = 0.0f;
    for (var _k0: i32 = 0i; _k0 < _SK; _k0 += 16i) {
        workgroupBarrier();
        for (var _e: i32 = _t; _e < 1024i; _e += 128i) {
            let _row: i32 = zyn_tdiv(_e, 64i);
            let _col: i32 = zyn_trem(_e, 64i);
            let _jf: i32 = min((_k0 + _row), (_SK - 1i));
            _kv[((_row * 65i) + _col)] = select(0.0f, select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(_col, (u_head_dim - 1i)))], (_col < u_head_dim)), ((_k0 + _row) < _SK));
            _kv[(((_row * 65i) + _col) + 1040i)] = select(0.0f, select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(_col, (u_head_dim - 1i)))], (_col < u_head_dim)), ((_k0 + _row) < _SK));
        }
        workgroupBarrier();
        for (var _j0: i32 = 0i; _j0 < 16i; _j0 += 16i) {
            var _s: array<f32, 4>;
            var _mt: f32 = _m;
            for (var _u: i32 = 0i; _u < 4i; _u++) {
                let _jj: i32 = ((_j0 + (_u * 4i)) + _r);
                let _j: i32 = (_k0 + _jj);
                let _jc: i32 = min(_j, (_SK - 1i));
                var _dot: f32 = 0.0f;
                for (var _d: i32 = 0i; _d < 64i; _d++) {
                    _dot = (_dot + (_qr[_d] * _kv[((_jj * 65i) + _d)]));
                }
                _s[_u] = select(bitcast<f32>(0xff800000u), _dot, ((_j < _SK) && (u_mask[((_qc * u_mask_d1) + _jc)] != 0u)));
                _mt = zyn_max_f32(_mt, _s[_u]);
            }
            if ((!(_mt <= bitcast<f32>(0xff800000u)))) {
                let _alpha: f32 = exp((_m - _mt));
                _l = (_l * _alpha);
                for (var _d: i32 = 0i; _d < 64i; _d++) {
                    _o[_d] = (_o[_d] * _alpha);
                }
                for (var _u: i32 = 0i; _u < 4i; _u++) {
                    let _p: f32 = select(0.0f, exp((_s[_u] - _mt)), (!(_s[_u] <= bitcast<f32>(0xff800000u))));
                    _l = (_l + _p);
                    let _jj: i32 = ((_j0 + (_u * 4i)) + _r);
                    for (var _d: i32 = 0i; _d < 64i; _d++) {
                        _o[_d] = (_o[_d] + (_p * _kv[(((_jj * 65i) + _d) + 1040i)]));
                    }
                }
                _m = _mt;
            }
        }
    }
    _ml[_t] = _m;
    _ml[(_t + 128i)] = _l;
    workgroupBarrier();
    var _M: f32 = bitcast<f32>(0xff800000u);
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        _M = zyn_max_f32(_M, _ml[((_q * 4i) + _x)]);
    }
    var _L: f32 = 0.0f;
    for (var _x: i32 = 0i; _x < 4i; _x++) {
        let _mx: f32 = _ml[((_q * 4i) + _x)];
        _L = (_L + (_ml[(((_q * 4i) + _x) + 128i)] * select(exp((_mx - _M)), 0.0f, (_mx <= bitcast<f32>(0xff800000u)))));
    }
    let _f: f32 = select(exp((_m - _M)), 0.0f, (_m <= bitcast<f32>(0xff800000u)));
    for (var _d: i32 = 0i; _d < 64i; _d++) {
        _o[_d] = (_o[_d] * _f);
    }
    for (var _x: i32 = 1i; _x < 4i; _x++) {
        if ((_r == _x)) {
            for (var _d: i32 = 0i; _d < 64i; _d++) {
                _kv[((_q * 64i) + _d)] = _o[_d];
            }
        }
        workgroupBarrier();
        if ((_r == 0i)) {
            for (var _d: i32 = 0i; _d < 64i; _d++) {
                _o[_d] = (_o[_d] + _kv[((_q * 64i) + _d)]);
            }
        }
        workgroupBarrier();
    }
    if (((_qi < _S) && (_r == 0i))) {
        let _inv: f32 = select((1.0f / _L), 0.0f, (_L == 0.0f));
        for (var _d: i32 = 0i; _d < 64i; _d++) {
            if ((_d < u_head_dim)) { u_out[(_orow + _d)] = (_o[_d] * _inv); }
        }
    }
}

// attention, head_dim up to 128: 16 queries per block, 4 threads each
@compute @workgroup_size(64)
fn zyn_k_attention_d128(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
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
    let u_mask_d0: i32 = zyn_p.u_mask_d0;
    let u_mask_d1: i32 = zyn_p.u_mask_d1;
    let u_seq_len: i32 = zyn_p.u_seq_len;
    // _kv: workgroup memory, declared above
    // _ml: workgroup memory, declared above
    if (zyn_in((u_head_dim - 1i), 128i, 1i)) {
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
        var _qr: array<f32, 128>;
        var _o: array<f32, 128>;
        for (var _d: i32 = 0i; _d < 128i; _d++) {
            _qr[_d] = (select(0.0f, u_Q[(_qrow + min(_d, (u_head_dim - 1i)))], (_d < u_head_dim)) * _scale);
            _o[_d] = 0.0f;
        }
        var _m: f32 = bitcast<f32>(0xff800000u);
        var _l: f32 = 0.0f;
        for (var _k0: i32 = 0i; _k0 < _SK; _k0 += 8i) {
            workgroupBarrier();
            for (var _e: i32 = _t; _e < 1024i; _e += 64i) {
                let _row: i32 = zyn_tdiv(_e, 128i);
                let _col: i32 = zyn_trem(_e, 128i);
                let _jf: i32 = min((_k0 + _row), (_SK - 1i));
                _kv[((_row * 129i) + _col)] = select(0.0f, select(0.0f, u_K[((_kbase + (_jf * u_K_d3)) + min(_col, (u_head_dim - 1i)))], (_col < u_head_dim)), ((_k0 + _row) < _SK));
                _kv[(((_row * 129i) + _col) + 1032i)] = select(0.0f, select(0.0f, u_V[((_vbase + (_jf * u_V_d3)) + min(_col, (u_head_dim - 1i)))], (_col < u_head_dim)), ((_k0 + _row) < _SK));
            }
            workgroupBarrier();
            for (var _j0: i32 = 0i; _j0 < 8i; _j0 += 8i) {
                var _s: array<f32, 2>;
                var _mt: f32 = _m;
                for (var _u: i32 = 0i; _u < 2i; _u++) {
                    let _jj: i32 = ((_j0 + (_u * 4i)) + _r);
                    let _j: i32 = (_k0 + _jj);
                    let _jc: i32 = min(_j, (_SK - 1i));
                    var _dot: f32 = 0.0f;
                    for (var _d: i32 = 0i; _d < 128i; _d++) {
                        _dot = (_dot + (_qr[_d] * _kv[((_jj * 129i) + _d)]));
                    }
                    _s[_u] = select(bitcast<f32>(0xff800000u), _dot, ((_j < _SK) && (u_mask[((_qc * u_mask_d1) + _jc)] != 0u)));
                    _mt = zyn_max_f32(_mt, _s[_u]);
                }
                if ((!(_mt <= bitcast<f32>(0xff800000u)))) {
                    let _alpha: f32 = exp((_m - _mt));
                    _l = (_l * _alpha);
                    for (var _d: i32 = 0i; _d < 128i; _d++) {
                        _o[_d] = (_o[_d] * _alpha);
                    }
                    for (var _u: i32 = 0i; _u < 2i; _u++) {
                        let _p: f32 = select(0.0f, exp((_s[_u] - _mt)), (!(_s[_u] <= bitcast<f32>(0xff800000u))));
                        _l = (_l + _p);
                        let _jj: i32 = ((_j0 + (_u * 4i)) + _r);
                        for (var _d: i32 = 0i; _d < 128i; _d++) {
                            _o[_d] = (_o[_d] + (_p * _kv[(((_jj * 129i) + _d) + 1032i)]));
                        }
                    }
                    _m = _mt;
                }
            }
        }
        _ml[_t] = _m;
        _ml[(_t + 64i)] = _l;
        workgroupBarrier();
        var _M: f32 = bitcast<f32>(0xff800000u);
        for (var _x: i32 = 0i; _x < 4i; _x++) {
            _M = zyn_max_f32(_M, _ml[((_q * 4i) + _x)]);
        }
        var _L: f32 = 0.0f;
        for (var _x: i32 = 0i; _x < 4i; _x++) {
            let _mx: f32 = _ml[((_q * 4i) + _x)];
            _L = (_L + (_ml[(((_q * 4i) + _x) + 64i)] * select(exp((_mx - _M)), 0.0f, (_mx <= bitcast<f32>(0xff800000u)))));
        }
        let _f: f32 = select(exp((_m - _M)), 0.0f, (_m <= bitcast<f32>(0xff800000u)));
        for (var _d: i32 = 0i; _d < 128i; _d++) {
            _o[_d] = (_o[_d] * _f);
        }
        for (var _x: i32 = 1i; _x < 4i; _x++) {
            if ((_r == _x)) {
                for (var _d: i32 = 0i; _d < 128i; _d++) {
                    _kv[((_q * 128i) + _d)] = _o[_d];
                }
            }
            workgroupBarrier();
            if ((_r == 0i)) {
                for (var _d: i32 = 0i; _d < 128i; _d++) {
                    _o[_d] = (_o[_d] + _kv[((_q * 128i) + _d)]);
                }
            }
            workgroupBarrier();
        }
        if (((_qi < _S) && (_r == 0i))) {
            let _inv: f32 = select((1.0f / _L), 0.0f, (_L == 0.0f));
            for (var _d: i32 = 0i; _d < 128i; _d++) {
                if ((_d < u_head_dim)) { u_out[(_orow + _d)] = (_o[_d] * _inv); }
            }
        }
    }
}

