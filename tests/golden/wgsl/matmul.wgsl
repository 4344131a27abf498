// ZynBook WGSL for kernel `matmul` (contraction as GEMM: every size; 128x128x8 tiles in two shared-memory buffers, 8x8 per thread (gemm: bm=128, bn=128, bk=8, tm=8, tn=8, width=1, mma=False, stages=0, swizzle=False, wgmma=False, tma=False, pad=0))

struct ZynParams {
    u_A_d0: i32,
    u_A_d1: i32,
    u_B_d0: i32,
    u_B_d1: i32,
    u_K: i32,
    u_M: i32,
    u_N: i32,
}

@group(0) @binding(0) var<storage, read> u_A: array<f32>;
@group(0) @binding(1) var<storage, read> u_B: array<f32>;
@group(0) @binding(2) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(3) var<uniform> zyn_p: ZynParams;

var<workgroup> _shm: array<f32, 2048>;
var<workgroup> _shn: array<f32, 2048>;

// signed division and remainder truncating as C, through unsigned ones
fn zyn_tdiv(a: i32, b: i32) -> i32 {
    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));
    return select(q, -q, (a < 0i) != (b < 0i)); }
fn zyn_trem(a: i32, b: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(abs(a)) % bitcast<u32>(abs(b)));
    return select(r, -r, a < 0i); }

// contraction as GEMM: every size; 128x128x8 tiles in two shared-memory buffers, 8x8 per thread
@compute @workgroup_size(256)
fn zyn_k_matmul(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_A_d0: i32 = zyn_p.u_A_d0;
    let u_A_d1: i32 = zyn_p.u_A_d1;
    let u_B_d0: i32 = zyn_p.u_B_d0;
    let u_B_d1: i32 = zyn_p.u_B_d1;
    let u_K: i32 = zyn_p.u_K;
    let u_M: i32 = zyn_p.u_M;
    let u_N: i32 = zyn_p.u_N;
    // _shm: workgroup memory, declared above
    // _shn: workgroup memory, declared above
    let _nM1: i32 = max(u_M, 0i);
    let _nN2: i32 = max(u_N, 0i);
    let _nK3: i32 = max(u_K, 0i);
    let _tm4: i32 = zyn_tdiv((_nM1 + 127i), 128i);
    let _tn5: i32 = zyn_tdiv((_nN2 + 127i), 128i);
    let _tb6: i32 = (_tm4 * _tn5);
    var _regm_0: f32;
    var _regm_1: f32;
    var _regm_2: f32;
    var _regm_3: f32;
    var _regn_0: f32;
    var _regn_1: f32;
    var _regn_2: f32;
    var _regn_3: f32;
    var _a: array<f32, 8>;
    var _b: array<f32, 8>;
    let _tx: i32 = zyn_trem(zyn_thread, 16i);
    let _ty: i32 = zyn_tdiv(zyn_thread, 16i);
    var _acc_0: f32;
    var _acc_1: f32;
    var _acc_2: f32;
    var _acc_3: f32;
    var _acc_4: f32;
    var _acc_5: f32;
    var _acc_6: f32;
    var _acc_7: f32;
    var _acc_8: f32;
    var _acc_9: f32;
    var _acc_10: f32;
    var _acc_11: f32;
    var _acc_12: f32;
    var _acc_13: f32;
    var _acc_14: f32;
    var _acc_15: f32;
    var _acc_16: f32;
    var _acc_17: f32;
    var _acc_18: f32;
    var _acc_19: f32;
    var _acc_20: f32;
    var _acc_21: f32;
    var _acc_22: f32;
    var _acc_23: f32;
    var _acc_24: f32;
    var _acc_25: f32;
    var _acc_26: f32;
    var _acc_27: f32;
    var _acc_28: f32;
    var _acc_29: f32;
    var _acc_30: f32;
    var _acc_31: f32;
    var _acc_32: f32;
    var _acc_33: f32;
    var _acc_34: f32;
    var _acc_35: f32;
    var _acc_36: f32;
    var _acc_37: f32;
    var _acc_38: f32;
    var _acc_39: f32;
    var _acc_40: f32;
    var _acc_41: f32;
    var _acc_42: f32;
    var _acc_43: f32;
    var _acc_44: f32;
    var _acc_45: f32;
    var _acc_46: f32;
    var _acc_47: f32;
    var _acc_48: f32;
    var _acc_49: f32;
    var _acc_50: f32;
    var _acc_51: f32;
    var _acc_52: f32;
    var _acc_53: f32;
    var _acc_54: f32;
    var _acc_55: f32;
    var _acc_56: f32;
    var _acc_57: f32;
    var _acc_58: f32;
    var _acc_59: f32;
    var _acc_60: f32;
    var _acc_61: f32;
    var _acc_62: f32;
    var _acc_63: f32;
    // line 4: for i in 0..M, j in 0..N:
    for (var _tile: i32 = zyn_block; _tile < _tb6; _tile += zyn_blocks) {
        let _tb: i32 = zyn_trem(_tile, _tb6);
        let _m0: i32 = (zyn_tdiv(_tb, _tn5) * 128i);
        let _n0: i32 = (zyn_trem(_tb, _tn5) * 128i);
        {
            _acc_0 = 0.0f;
            _acc_1 = 0.0f;
            _acc_2 = 0.0f;
            _acc_3 = 0.0f;
            _acc_4 = 0.0f;
            _acc_5 = 0.0f;
            _acc_6 = 0.0f;
            _acc_7 = 0.0f;
            _acc_8 = 0.0f;
            _acc_9 = 0.0f;
            _acc_10 = 0.0f;
            _acc_11 = 0.0f;
            _acc_12 = 0.0f;
            _acc_13 = 0.0f;
            _acc_14 = 0.0f;
            _acc_15 = 0.0f;
            _acc_16 = 0.0f;
            _acc_17 = 0.0f;
            _acc_18 = 0.0f;
            _acc_19 = 0.0f;
            _acc_20 = 0.0f;
            _acc_21 = 0.0f;
            _acc_22 = 0.0f;
            _acc_23 = 0.0f;
            _acc_24 = 0.0f;
            _acc_25 = 0.0f;
            _acc_26 = 0.0f;
            _acc_27 = 0.0f;
            _acc_28 = 0.0f;
            _acc_29 = 0.0f;
            _acc_30 = 0.0f;
            _acc_31 = 0.0f;
            _acc_32 = 0.0f;
            _acc_33 = 0.0f;
            _acc_34 = 0.0f;
            _acc_35 = 0.0f;
            _acc_36 = 0.0f;
            _acc_37 = 0.0f;
            _acc_38 = 0.0f;
            _acc_39 = 0.0f;
            _acc_40 = 0.0f;
            _acc_41 = 0.0f;
            _acc_42 = 0.0f;
            _acc_43 = 0.0f;
            _acc_44 = 0.0f;
            _acc_45 = 0.0f;
            _acc_46 = 0.0f;
            _acc_47 = 0.0f;
            _acc_48 = 0.0f;
            _acc_49 = 0.0f;
            _acc_50 = 0.0f;
            _acc_51 = 0.0f;
            _acc_52 = 0.0f;
            _acc_53 = 0.0f;
            _acc_54 = 0.0f;
            _acc_55 = 0.0f;
            _acc_56 = 0.0f;
            _acc_57 = 0.0f;
            _acc_58 = 0.0f;
            _acc_59 = 0.0f;
            _acc_60 = 0.0f;
            _acc_61 = 0.0f;
            _acc_62 = 0.0f;
            _acc_63 = 0.0f;
        }
        let _nk7: i32 = zyn_tdiv((_nK3 + 7i), 8i);
        {
            let _x_0: i32 = zyn_tdiv(zyn_thread, 8i);
            let _k_0: i32 = zyn_trem(zyn_thread, 8i);
            var _v15_0: f32 = 0.0f;
            if ((((_m0 + _x_0) < _nM1) && (_k_0 < _nK3))) {
                let u_i_1_0: i32 = (_m0 + _x_0);
                // line 6: for k in 0..K:
                let u_k_2_0: i32 = _k_0;
                _v15_0 = u_A[((u_i_1_0 * u_A_d1) + u_k_2_0)];
            }
            _regm_0 = _v15_0;
            let _x_1: i32 = (zyn_tdiv(zyn_thread, 8i) + 32i);
            let _k_1: i32 = zyn_trem(zyn_thread, 8i);
            var _v15_1: f32 = 0.0f;
            if ((((_m0 + _x_1) < _nM1) && (_k_1 < _nK3))) {
                let u_i_1_1: i32 = (_m0 + _x_1);
                let u_k_2_1: i32 = _k_1;
                _v15_1 = u_A[((u_i_1_1 * u_A_d1) + u_k_2_1)];
            }
            _regm_1 = _v15_1;
            let _x_2: i32 = (zyn_tdiv(zyn_thread, 8i) + 64i);
            let _k_2: i32 = zyn_trem(zyn_thread, 8i);
            var _v15_2: f32 = 0.0f;
            if ((((_m0 + _x_2) < _nM1) && (_k_2 < _nK3))) {
                let u_i_1_2: i32 = (_m0 + _x_2);
                let u_k_2_2: i32 = _k_2;
                _v15_2 = u_A[((u_i_1_2 * u_A_d1) + u_k_2_2)];
            }
            _regm_2 = _v15_2;
            let _x_3: i32 = (zyn_tdiv(zyn_thread, 8i) + 96i);
            let _k_3: i32 = zyn_trem(zyn_thread, 8i);
            var _v15_3: f32 = 0.0f;
            if ((((_m0 + _x_3) < _nM1) && (_k_3 < _nK3))) {
                let u_i_1_3: i32 = (_m0 + _x_3);
                let u_k_2_3: i32 = _k_3;
                _v15_3 = u_A[((u_i_1_3 * u_A_d1) + u_k_2_3)];
            }
            _regm_3 = _v15_3;
        }
        {
            let _x_0: i32 = zyn_trem(zyn_thread, 128i);
            let _k_0: i32 = zyn_tdiv(zyn_thread, 128i);
            var _v17_0: f32 = 0.0f;
            if ((((_n0 + _x_0) < _nN2) && (_k_0 < _nK3))) {
                let u_j_1_0: i32 = (_n0 + _x_0);
                let u_k_3_0: i32 = _k_0;
                _v17_0 = u_B[((u_k_3_0 * u_B_d1) + u_j_1_0)];
            }
            _regn_0 = _v17_0;
            let _x_1: i32 = zyn_trem(zyn_thread, 128i);
            let _k_1: i32 = (zyn_tdiv(zyn_thread, 128i) + 2i);
            var _v17_1: f32 = 0.0f;
            if ((((_n0 + _x_1) < _nN2) && (_k_1 < _nK3))) {
                let u_j_1_1: i32 = (_n0 + _x_1);
                let u_k_3_1: i32 = _k_1;
                _v17_1 = u_B[((u_k_3_1 * u_B_d1) + u_j_1_1)];
            }
            _regn_1 = _v17_1;
            let _x_2: i32 = zyn_trem(zyn_thread, 128i);
            let _k_2: i32 = (zyn_tdiv(zyn_thread, 128i) + 4i);
            var _v17_2: f32 = 0.0f;
            if ((((_n0 + _x_2) < _nN2) && (_k_2 < _nK3))) {
                let u_j_1_2: i32 = (_n0 + _x_2);
                let u_k_3_2: i32 = _k_2;
                _v17_2 = u_B[((u_k_3_2 * u_B_d1) + u_j_1_2)];
            }
            _regn_2 = _v17_2;
            let _x_3: i32 = zyn_trem(zyn_thread, 128i);
            let _k_3: i32 = (zyn_tdiv(zyn_thread, 128i) + 6i);
            var _v17_3: f32 = 0.0f;
            if ((((_n0 + _x_3) < _nN2) && (_k_3 < _nK3))) {
                let u_j_1_3: i32 = (_n0 + _x_3);
                let u_k_3_3: i32 = _k_3;
                _v17_3 = u_B[((u_k_3_3 * u_B_d1) + u_j_1_3)];
            }
            _regn_3 = _v17_3;
        }
        {
            let _x_0: i32 = zyn_tdiv(zyn_thread, 8i);
            let _k_0: i32 = zyn_trem(zyn_thread, 8i);
            _shm[((_k_0 * 128i) + _x_0)] = _regm_0;
            let _x_1: i32 = (zyn_tdiv(zyn_thread, 8i) + 32i);
            let _k_1: i32 = zyn_trem(zyn_thread, 8i);
            _shm[((_k_1 * 128i) + _x_1)] = _regm_1;
            let _x_2: i32 = (zyn_tdiv(zyn_thread, 8i) + 64i);
            let _k_2: i32 = zyn_trem(zyn_thread, 8i);
            _shm[((_k_2 * 128i) + _x_2)] = _regm_2;
            let _x_3: i32 = (zyn_tdiv(zyn_thread, 8i) + 96i);
            let _k_3: i32 = zyn_trem(zyn_thread, 8i);
            _shm[((_k_3 * 128i) + _x_3)] = _regm_3;
        }
        {
            let _x_0: i32 = zyn_trem(zyn_thread, 128i);
            let _k_0: i32 = zyn_tdiv(zyn_thread, 128i);
            _shn[((_k_0 * 128i) + _x_0)] = _regn_0;
            let _x_1: i32 = zyn_trem(zyn_thread, 128i);
            let _k_1: i32 = (zyn_tdiv(zyn_thread, 128i) + 2i);
            _shn[((_k_1 * 128i) + _x_1)] = _regn_1;
            let _x_2: i32 = zyn_trem(zyn_thread, 128i);
            let _k_2: i32 = (zyn_tdiv(zyn_thread, 128i) + 4i);
            _shn[((_k_2 * 128i) + _x_2)] = _regn_2;
            let _x_3: i32 = zyn_trem(zyn_thread, 128i);
            let _k_3: i32 = (zyn_tdiv(zyn_thread, 128i) + 6i);
            _shn[((_k_3 * 128i) + _x_3)] = _regn_3;
        }
        workgroupBarrier();
        for (var _kt: i32 = 0i; _kt < _nk7; _kt++) {
            if (((_kt + 1i) < _nk7)) {
                {
                    let _x_0: i32 = zyn_tdiv(zyn_thread, 8i);
                    let _k_0: i32 = zyn_trem(zyn_thread, 8i);
                    var _v9_0: f32 = 0.0f;
                    if ((((_m0 + _x_0) < _nM1) && ((((_kt + 1i) * 8i) + _k_0) < _nK3))) {
                        let u_i_0: i32 = (_m0 + _x_0);
                        let u_k_0: i32 = (((_kt + 1i) * 8i) + _k_0);
                        _v9_0 = u_A[((u_i_0 * u_A_d1) + u_k_0)];
                    }
                    _regm_0 = _v9_0;
                    let _x_1: i32 = (zyn_tdiv(zyn_thread, 8i) + 32i);
                    let _k_1: i32 = zyn_trem(zyn_thread, 8i);
                    var _v9_1: f32 = 0.0f;
                    if ((((_m0 + _x_1) < _nM1) && ((((_kt + 1i) * 8i) + _k_1) < _nK3))) {
                        let u_i_1: i32 = (_m0 + _x_1);
                        let u_k_1: i32 = (((_kt + 1i) * 8i) + _k_1);
                        _v9_1 = u_A[((u_i_1 * u_A_d1) + u_k_1)];
                    }
                    _regm_1 = _v9_1;
                    let _x_2: i32 = (zyn_tdiv(zyn_thread, 8i) + 64i);
                    let _k_2: i32 = zyn_trem(zyn_thread, 8i);
                    var _v9_2: f32 = 0.0f;
                    if ((((_m0 + _x_2) < _nM1) && ((((_kt + 1i) * 8i) + _k_2) < _nK3))) {
                        let u_i_2: i32 = (_m0 + _x_2);
                        let u_k_2: i32 = (((_kt + 1i) * 8i) + _k_2);
                        _v9_2 = u_A[((u_i_2 * u_A_d1) + u_k_2)];
                    }
                    _regm_2 = _v9_2;
                    let _x_3: i32 = (zyn_tdiv(zyn_thread, 8i) + 96i);
                    let _k_3: i32 = zyn_trem(zyn_thread, 8i);
                    var _v9_3: f32 = 0.0f;
                    if ((((_m0 + _x_3) < _nM1) && ((((_kt + 1i) * 8i) + _k_3) < _nK3))) {
                        let u_i_3: i32 = (_m0 + _x_3);
                        let u_k_3: i32 = (((_kt + 1i) * 8i) + _k_3);
                        _v9_3 = u_A[((u_i_3 * u_A_d1) + u_k_3)];
                    }
                    _regm_3 = _v9_3;
                }
                {
                    let _x_0: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_0: i32 = zyn_tdiv(zyn_thread, 128i);
                    var _v11_0: f32 = 0.0f;
                    if ((((_n0 + _x_0) < _nN2) && ((((_kt + 1i) * 8i) + _k_0) < _nK3))) {
                        let u_j_0: i32 = (_n0 + _x_0);
                        let u_k_1_0: i32 = (((_kt + 1i) * 8i) + _k_0);
                        _v11_0 = u_B[((u_k_1_0 * u_B_d1) + u_j_0)];
                    }
                    _regn_0 = _v11_0;
                    let _x_1: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_1: i32 = (zyn_tdiv(zyn_thread, 128i) + 2i);
                    var _v11_1: f32 = 0.0f;
                    if ((((_n0 + _x_1) < _nN2) && ((((_kt + 1i) * 8i) + _k_1) < _nK3))) {
                        let u_j_1: i32 = (_n0 + _x_1);
                        let u_k_1_1: i32 = (((_kt + 1i) * 8i) + _k_1);
                        _v11_1 = u_B[((u_k_1_1 * u_B_d1) + u_j_1)];
                    }
                    _regn_1 = _v11_1;
                    let _x_2: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_2: i32 = (zyn_tdiv(zyn_thread, 128i) + 4i);
                    var _v11_2: f32 = 0.0f;
                    if ((((_n0 + _x_2) < _nN2) && ((((_kt + 1i) * 8i) + _k_2) < _nK3))) {
                        let u_j_2: i32 = (_n0 + _x_2);
                        let u_k_1_2: i32 = (((_kt + 1i) * 8i) + _k_2);
                        _v11_2 = u_B[((u_k_1_2 * u_B_d1) + u_j_2)];
                    }
                    _regn_2 = _v11_2;
                    let _x_3: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_3: i32 = (zyn_tdiv(zyn_thread, 128i) + 6i);
                    var _v11_3: f32 = 0.0f;
                    if ((((_n0 + _x_3) < _nN2) && ((((_kt + 1i) * 8i) + _k_3) < _nK3))) {
                        let u_j_3: i32 = (_n0 + _x_3);
                        let u_k_1_3: i32 = (((_kt + 1i) * 8i) + _k_3);
                        _v11_3 = u_B[((u_k_1_3 * u_B_d1) + u_j_3)];
                    }
                    _regn_3 = _v11_3;
                }
            }
            for (var _kk: i32 = 0i; _kk < 8i; _kk++) {
                _a[0i] = _shm[(((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_ty * 4i))];
                _a[1i] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_ty * 4i)) + 1i)];
                _a[2i] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_ty * 4i)) + 2i)];
                _a[3i] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_ty * 4i)) + 3i)];
                _a[4i] = _shm[(((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_ty * 4i)))];
                _a[(4i + 1i)] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_ty * 4i))) + 1i)];
                _a[(4i + 2i)] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_ty * 4i))) + 2i)];
                _a[(4i + 3i)] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_ty * 4i))) + 3i)];
                _b[0i] = _shn[(((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_tx * 4i))];
                _b[1i] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_tx * 4i)) + 1i)];
                _b[2i] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_tx * 4i)) + 2i)];
                _b[3i] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_tx * 4i)) + 3i)];
                _b[4i] = _shn[(((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_tx * 4i)))];
                _b[(4i + 1i)] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_tx * 4i))) + 1i)];
                _b[(4i + 2i)] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_tx * 4i))) + 2i)];
                _b[(4i + 3i)] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_tx * 4i))) + 3i)];
                {
                    {
                        _acc_0 = (_acc_0 + (_a[0i] * _b[0i]));
                        _acc_1 = (_acc_1 + (_a[0i] * _b[1i]));
                        _acc_2 = (_acc_2 + (_a[0i] * _b[2i]));
                        _acc_3 = (_acc_3 + (_a[0i] * _b[3i]));
                        _acc_4 = (_acc_4 + (_a[0i] * _b[4i]));
                        _acc_5 = (_acc_5 + (_a[0i] * _b[5i]));
                        _acc_6 = (_acc_6 + (_a[0i] * _b[6i]));
                        _acc_7 = (_acc_7 + (_a[0i] * _b[7i]));
                    }
                    {
                        _acc_8 = (_acc_8 + (_a[1i] * _b[0i]));
                        _acc_9 = (_acc_9 + (_a[1i] * _b[1i]));
                        _acc_10 = (_acc_10 + (_a[1i] * _b[2i]));
                        _acc_11 = (_acc_11 + (_a[1i] * _b[3i]));
                        _acc_12 = (_acc_12 + (_a[1i] * _b[4i]));
                        _acc_13 = (_acc_13 + (_a[1i] * _b[5i]));
                        _acc_14 = (_acc_14 + (_a[1i] * _b[6i]));
                        _acc_15 = (_acc_15 + (_a[1i] * _b[7i]));
                    }
                    {
                        _acc_16 = (_acc_16 + (_a[2i] * _b[0i]));
                        _acc_17 = (_acc_17 + (_a[2i] * _b[1i]));
                        _acc_18 = (_acc_18 + (_a[2i] * _b[2i]));
                        _acc_19 = (_acc_19 + (_a[2i] * _b[3i]));
                        _acc_20 = (_acc_20 + (_a[2i] * _b[4i]));
                        _acc_21 = (_acc_21 + (_a[2i] * _b[5i]));
                        _acc_22 = (_acc_22 + (_a[2i] * _b[6i]));
                        _acc_23 = (_acc_23 + (_a[2i] * _b[7i]));
                    }
                    {
                        _acc_24 = (_acc_24 + (_a[3i] * _b[0i]));
                        _acc_25 = (_acc_25 + (_a[3i] * _b[1i]));
                        _acc_26 = (_acc_26 + (_a[3i] * _b[2i]));
                        _acc_27 = (_acc_27 + (_a[3i] * _b[3i]));
                        _acc_28 = (_acc_28 + (_a[3i] * _b[4i]));
                        _acc_29 = (_acc_29 + (_a[3i] * _b[5i]));
                        _acc_30 = (_acc_30 + (_a[3i] * _b[6i]));
                        _acc_31 = (_acc_31 + (_a[3i] * _b[7i]));
                    }
                    {
                        _acc_32 = (_acc_32 + (_a[4i] * _b[0i]));
                        _acc_33 = (_acc_33 + (_a[4i] * _b[1i]));
                        _acc_34 = (_acc_34 + (_a[4i] * _b[2i]));
                        _acc_35 = (_acc_35 + (_a[4i] * _b[3i]));
                        _acc_36 = (_acc_36 + (_a[4i] * _b[4i]));
                        _acc_37 = (_acc_37 + (_a[4i] * _b[5i]));
                        _acc_38 = (_acc_38 + (_a[4i] * _b[6i]));
                        _acc_39 = (_acc_39 + (_a[4i] * _b[7i]));
                    }
                    {
                        _acc_40 = (_acc_40 + (_a[5i] * _b[0i]));
                        _acc_41 = (_acc_41 + (_a[5i] * _b[1i]));
                        _acc_42 = (_acc_42 + (_a[5i] * _b[2i]));
                        _acc_43 = (_acc_43 + (_a[5i] * _b[3i]));
                        _acc_44 = (_acc_44 + (_a[5i] * _b[4i]));
                        _acc_45 = (_acc_45 + (_a[5i] * _b[5i]));
                        _acc_46 = (_acc_46 + (_a[5i] * _b[6i]));
                        _acc_47 = (_acc_47 + (_a[5i] * _b[7i]));
                    }
                    {
                        _acc_48 = (_acc_48 + (_a[6i] * _b[0i]));
                        _acc_49 = (_acc_49 + (_a[6i] * _b[1i]));
                        _acc_50 = (_acc_50 + (_a[6i] * _b[2i]));
                        _acc_51 = (_acc_51 + (_a[6i] * _b[3i]));
                        _acc_52 = (_acc_52 + (_a[6i] * _b[4i]));
                        _acc_53 = (_acc_53 + (_a[6i] * _b[5i]));
                        _acc_54 = (_acc_54 + (_a[6i] * _b[6i]));
                        _acc_55 = (_acc_55 + (_a[6i] * _b[7i]));
                    }
                    {
                        _acc_56 = (_acc_56 + (_a[7i] * _b[0i]));
                        _acc_57 = (_acc_57 + (_a[7i] * _b[1i]));
                        _acc_58 = (_acc_58 + (_a[7i] * _b[2i]));
                        _acc_59 = (_acc_59 + (_a[7i] * _b[3i]));
                        _acc_60 = (_acc_60 + (_a[7i] * _b[4i]));
                        _acc_61 = (_acc_61 + (_a[7i] * _b[5i]));
                        _acc_62 = (_acc_62 + (_a[7i] * _b[6i]));
                        _acc_63 = (_acc_63 + (_a[7i] * _b[7i]));
                    }
                }
            }
            if (((_kt + 1i) < _nk7)) {
                {
                    let _x_0: i32 = zyn_tdiv(zyn_thread, 8i);
                    let _k_0: i32 = zyn_trem(zyn_thread, 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_0 * 128i) + _x_0))] = _regm_0;
                    let _x_1: i32 = (zyn_tdiv(zyn_thread, 8i) + 32i);
                    let _k_1: i32 = zyn_trem(zyn_thread, 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_1 * 128i) + _x_1))] = _regm_1;
                    let _x_2: i32 = (zyn_tdiv(zyn_thread, 8i) + 64i);
                    let _k_2: i32 = zyn_trem(zyn_thread, 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_2 * 128i) + _x_2))] = _regm_2;
                    let _x_3: i32 = (zyn_tdiv(zyn_thread, 8i) + 96i);
                    let _k_3: i32 = zyn_trem(zyn_thread, 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_3 * 128i) + _x_3))] = _regm_3;
                }
                {
                    let _x_0: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_0: i32 = zyn_tdiv(zyn_thread, 128i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_0 * 128i) + _x_0))] = _regn_0;
                    let _x_1: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_1: i32 = (zyn_tdiv(zyn_thread, 128i) + 2i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_1 * 128i) + _x_1))] = _regn_1;
                    let _x_2: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_2: i32 = (zyn_tdiv(zyn_thread, 128i) + 4i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_2 * 128i) + _x_2))] = _regn_2;
                    let _x_3: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_3: i32 = (zyn_tdiv(zyn_thread, 128i) + 6i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_3 * 128i) + _x_3))] = _regn_3;
                }
            }
            workgroupBarrier();
        }
        {
            {
                // line 8: out[i, j] = sum
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_0_0: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_0_0: f32 = (0.0f + _acc_0);
                    u_out[((u_i_2_0_0 * u_N) + u_j_2_0_0)] = u_sum_0_0;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_0_1: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_0_1: f32 = (0.0f + _acc_1);
                    u_out[((u_i_2_0_1 * u_N) + u_j_2_0_1)] = u_sum_0_1;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_0_2: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_0_2: f32 = (0.0f + _acc_2);
                    u_out[((u_i_2_0_2 * u_N) + u_j_2_0_2)] = u_sum_0_2;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_0_3: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_0_3: f32 = (0.0f + _acc_3);
                    u_out[((u_i_2_0_3 * u_N) + u_j_2_0_3)] = u_sum_0_3;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_0_4: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_0_4: f32 = (0.0f + _acc_4);
                    u_out[((u_i_2_0_4 * u_N) + u_j_2_0_4)] = u_sum_0_4;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_0_5: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_0_5: f32 = (0.0f + _acc_5);
                    u_out[((u_i_2_0_5 * u_N) + u_j_2_0_5)] = u_sum_0_5;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_0_6: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_0_6: f32 = (0.0f + _acc_6);
                    u_out[((u_i_2_0_6 * u_N) + u_j_2_0_6)] = u_sum_0_6;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_0_7: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_0_7: f32 = (0.0f + _acc_7);
                    u_out[((u_i_2_0_7 * u_N) + u_j_2_0_7)] = u_sum_0_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_1_0: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_1_0: f32 = (0.0f + _acc_8);
                    u_out[((u_i_2_1_0 * u_N) + u_j_2_1_0)] = u_sum_1_0;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_1_1: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_1_1: f32 = (0.0f + _acc_9);
                    u_out[((u_i_2_1_1 * u_N) + u_j_2_1_1)] = u_sum_1_1;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_1_2: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_1_2: f32 = (0.0f + _acc_10);
                    u_out[((u_i_2_1_2 * u_N) + u_j_2_1_2)] = u_sum_1_2;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_1_3: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_1_3: f32 = (0.0f + _acc_11);
                    u_out[((u_i_2_1_3 * u_N) + u_j_2_1_3)] = u_sum_1_3;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_1_4: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_1_4: f32 = (0.0f + _acc_12);
                    u_out[((u_i_2_1_4 * u_N) + u_j_2_1_4)] = u_sum_1_4;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_1_5: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_1_5: f32 = (0.0f + _acc_13);
                    u_out[((u_i_2_1_5 * u_N) + u_j_2_1_5)] = u_sum_1_5;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_1_6: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_1_6: f32 = (0.0f + _acc_14);
                    u_out[((u_i_2_1_6 * u_N) + u_j_2_1_6)] = u_sum_1_6;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_1_7: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_1_7: f32 = (0.0f + _acc_15);
                    u_out[((u_i_2_1_7 * u_N) + u_j_2_1_7)] = u_sum_1_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_2_0: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_2_0: f32 = (0.0f + _acc_16);
                    u_out[((u_i_2_2_0 * u_N) + u_j_2_2_0)] = u_sum_2_0;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_2_1: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_2_1: f32 = (0.0f + _acc_17);
                    u_out[((u_i_2_2_1 * u_N) + u_j_2_2_1)] = u_sum_2_1;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_2_2: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_2_2: f32 = (0.0f + _acc_18);
                    u_out[((u_i_2_2_2 * u_N) + u_j_2_2_2)] = u_sum_2_2;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_2_3: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_2_3: f32 = (0.0f + _acc_19);
                    u_out[((u_i_2_2_3 * u_N) + u_j_2_2_3)] = u_sum_2_3;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_2_4: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_2_4: f32 = (0.0f + _acc_20);
                    u_out[((u_i_2_2_4 * u_N) + u_j_2_2_4)] = u_sum_2_4;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_2_5: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_2_5: f32 = (0.0f + _acc_21);
                    u_out[((u_i_2_2_5 * u_N) + u_j_2_2_5)] = u_sum_2_5;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_2_6: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_2_6: f32 = (0.0f + _acc_22);
                    u_out[((u_i_2_2_6 * u_N) + u_j_2_2_6)] = u_sum_2_6;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_2_7: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_2_7: f32 = (0.0f + _acc_23);
                    u_out[((u_i_2_2_7 * u_N) + u_j_2_2_7)] = u_sum_2_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_3_0: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_3_0: f32 = (0.0f + _acc_24);
                    u_out[((u_i_2_3_0 * u_N) + u_j_2_3_0)] = u_sum_3_0;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_3_1: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_3_1: f32 = (0.0f + _acc_25);
                    u_out[((u_i_2_3_1 * u_N) + u_j_2_3_1)] = u_sum_3_1;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_3_2: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_3_2: f32 = (0.0f + _acc_26);
                    u_out[((u_i_2_3_2 * u_N) + u_j_2_3_2)] = u_sum_3_2;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_3_3: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_3_3: f32 = (0.0f + _acc_27);
                    u_out[((u_i_2_3_3 * u_N) + u_j_2_3_3)] = u_sum_3_3;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_3_4: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_3_4: f32 = (0.0f + _acc_28);
                    u_out[((u_i_2_3_4 * u_N) + u_j_2_3_4)] = u_sum_3_4;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_3_5: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_3_5: f32 = (0.0f + _acc_29);
                    u_out[((u_i_2_3_5 * u_N) + u_j_2_3_5)] = u_sum_3_5;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_3_6: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_3_6: f32 = (0.0f + _acc_30);
                    u_out[((u_i_2_3_6 * u_N) + u_j_2_3_6)] = u_sum_3_6;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_3_7: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_3_7: f32 = (0.0f + _acc_31);
                    u_out[((u_i_2_3_7 * u_N) + u_j_2_3_7)] = u_sum_3_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_4_0: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_4_0: f32 = (0.0f + _acc_32);
                    u_out[((u_i_2_4_0 * u_N) + u_j_2_4_0)] = u_sum_4_0;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_4_1: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_4_1: f32 = (0.0f + _acc_33);
                    u_out[((u_i_2_4_1 * u_N) + u_j_2_4_1)] = u_sum_4_1;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_4_2: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_4_2: f32 = (0.0f + _acc_34);
                    u_out[((u_i_2_4_2 * u_N) + u_j_2_4_2)] = u_sum_4_2;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_4_3: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_4_3: f32 = (0.0f + _acc_35);
                    u_out[((u_i_2_4_3 * u_N) + u_j_2_4_3)] = u_sum_4_3;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_4_4: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_4_4: f32 = (0.0f + _acc_36);
                    u_out[((u_i_2_4_4 * u_N) + u_j_2_4_4)] = u_sum_4_4;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_4_5: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_4_5: f32 = (0.0f + _acc_37);
                    u_out[((u_i_2_4_5 * u_N) + u_j_2_4_5)] = u_sum_4_5;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_4_6: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_4_6: f32 = (0.0f + _acc_38);
                    u_out[((u_i_2_4_6 * u_N) + u_j_2_4_6)] = u_sum_4_6;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_4_7: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_4_7: f32 = (0.0f + _acc_39);
                    u_out[((u_i_2_4_7 * u_N) + u_j_2_4_7)] = u_sum_4_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_5_0: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_5_0: f32 = (0.0f + _acc_40);
                    u_out[((u_i_2_5_0 * u_N) + u_j_2_5_0)] = u_sum_5_0;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_5_1: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_5_1: f32 = (0.0f + _acc_41);
                    u_out[((u_i_2_5_1 * u_N) + u_j_2_5_1)] = u_sum_5_1;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_5_2: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_5_2: f32 = (0.0f + _acc_42);
                    u_out[((u_i_2_5_2 * u_N) + u_j_2_5_2)] = u_sum_5_2;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_5_3: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_5_3: f32 = (0.0f + _acc_43);
                    u_out[((u_i_2_5_3 * u_N) + u_j_2_5_3)] = u_sum_5_3;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_5_4: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_5_4: f32 = (0.0f + _acc_44);
                    u_out[((u_i_2_5_4 * u_N) + u_j_2_5_4)] = u_sum_5_4;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_5_5: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_5_5: f32 = (0.0f + _acc_45);
                    u_out[((u_i_2_5_5 * u_N) + u_j_2_5_5)] = u_sum_5_5;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_5_6: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_5_6: f32 = (0.0f + _acc_46);
                    u_out[((u_i_2_5_6 * u_N) + u_j_2_5_6)] = u_sum_5_6;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_5_7: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_5_7: f32 = (0.0f + _acc_47);
                    u_out[((u_i_2_5_7 * u_N) + u_j_2_5_7)] = u_sum_5_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_6_0: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_6_0: f32 = (0.0f + _acc_48);
                    u_out[((u_i_2_6_0 * u_N) + u_j_2_6_0)] = u_sum_6_0;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_6_1: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_6_1: f32 = (0.0f + _acc_49);
                    u_out[((u_i_2_6_1 * u_N) + u_j_2_6_1)] = u_sum_6_1;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_6_2: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_6_2: f32 = (0.0f + _acc_50);
                    u_out[((u_i_2_6_2 * u_N) + u_j_2_6_2)] = u_sum_6_2;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_6_3: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_6_3: f32 = (0.0f + _acc_51);
                    u_out[((u_i_2_6_3 * u_N) + u_j_2_6_3)] = u_sum_6_3;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_6_4: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_6_4: f32 = (0.0f + _acc_52);
                    u_out[((u_i_2_6_4 * u_N) + u_j_2_6_4)] = u_sum_6_4;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_6_5: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_6_5: f32 = (0.0f + _acc_53);
                    u_out[((u_i_2_6_5 * u_N) + u_j_2_6_5)] = u_sum_6_5;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_6_6: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_6_6: f32 = (0.0f + _acc_54);
                    u_out[((u_i_2_6_6 * u_N) + u_j_2_6_6)] = u_sum_6_6;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_6_7: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_6_7: f32 = (0.0f + _acc_55);
                    u_out[((u_i_2_6_7 * u_N) + u_j_2_6_7)] = u_sum_6_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_7_0: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_7_0: f32 = (0.0f + _acc_56);
                    u_out[((u_i_2_7_0 * u_N) + u_j_2_7_0)] = u_sum_7_0;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_7_1: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_7_1: f32 = (0.0f + _acc_57);
                    u_out[((u_i_2_7_1 * u_N) + u_j_2_7_1)] = u_sum_7_1;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_7_2: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_7_2: f32 = (0.0f + _acc_58);
                    u_out[((u_i_2_7_2 * u_N) + u_j_2_7_2)] = u_sum_7_2;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_7_3: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_7_3: f32 = (0.0f + _acc_59);
                    u_out[((u_i_2_7_3 * u_N) + u_j_2_7_3)] = u_sum_7_3;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_7_4: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_7_4: f32 = (0.0f + _acc_60);
                    u_out[((u_i_2_7_4 * u_N) + u_j_2_7_4)] = u_sum_7_4;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_7_5: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_7_5: f32 = (0.0f + _acc_61);
                    u_out[((u_i_2_7_5 * u_N) + u_j_2_7_5)] = u_sum_7_5;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_7_6: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_7_6: f32 = (0.0f + _acc_62);
                    u_out[((u_i_2_7_6 * u_N) + u_j_2_7_6)] = u_sum_7_6;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_7_7: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_7_7: f32 = (0.0f + _acc_63);
                    u_out[((u_i_2_7_7 * u_N) + u_j_2_7_7)] = u_sum_7_7;
                }
            }
        }
    }
}

