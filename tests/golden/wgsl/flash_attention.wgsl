// flash_attention: @kernel flash_attention -- WGSL schedule `flash`, ZynML line 1
// note: online softmax over key tiles of 64; the body was recognised as flash attention (Q K^T / sqrt(head_dim), row_max, row_sum, @ V)

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
    seq_len: i32,
    out_d0: i32,
    out_d1: i32,
    out_d2: i32,
    out_d3: i32,
}

@group(0) @binding(0) var<storage, read> Q: array<f32>;  // Q: f32
@group(0) @binding(1) var<storage, read> K: array<f32>;  // K: f32
@group(0) @binding(2) var<storage, read> V: array<f32>;  // V: f32
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // out: f32
@group(0) @binding(4) var<uniform> P: Params;

var<workgroup> z_q: array<f32, 256>;
var<workgroup> z_p: array<f32, 64>;
var<workgroup> z_red_f32: array<f32, 64>;

@compute @workgroup_size(64, 1, 1)
fn flash_attention(@builtin(workgroup_id) z_wg: vec3<u32>, @builtin(num_workgroups) z_nwg: vec3<u32>, @builtin(local_invocation_id) z_lid: vec3<u32>) {
    let z_wid: i32 = i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y);
    if (z_wid >= P.Q_d0 * P.Q_d1 * P.Q_d2) { return; }
    // one workgroup per query row (b, h, i)
    let i: i32 = z_wid % P.Q_d2;
    let bh: i32 = z_wid / P.Q_d2;
    let D: i32 = P.Q_d3;
    let S: i32 = P.K_d2;
    let t: i32 = i32(z_lid.x);
    let scale: f32 = 1.0 / sqrt(f32(D));
    let q_base: i32 = (bh * P.Q_d2 + i) * D;
    let kv_base: i32 = bh * S * D;
    for (var d: i32 = t; d < D; d = d + 64i) {
        z_q[d] = f32(Q[q_base + d]);
    }
    workgroupBarrier();
    var m: f32 = bitcast<f32>(0xff800000u);   // running max
    var l: f32 = 0.0f;                        // running sum of exp
    var acc: array<f32, 4>;                  // running output, dims t + 64 * r
    for (var j0: i32 = 0i; j0 < S; j0 = j0 + 64i) {
        // score of key j0 + t
        let j: i32 = j0 + t;
        var s: f32 = bitcast<f32>(0xff800000u);
        if (j < S) {
            var dot: f32 = 0.0f;
            for (var d: i32 = 0i; d < D; d = d + 1i) {
                dot = dot + z_q[d] * f32(K[kv_base + j * D + d]);
            }
            s = dot * scale;
        }
        z_red_f32[z_lid.x] = s;
        workgroupBarrier();
        for (var z_s: u32 = 32u; z_s > 0u; z_s = z_s >> 1u) {
            if (z_lid.x < z_s) {
                z_red_f32[z_lid.x] = max(z_red_f32[z_lid.x], z_red_f32[z_lid.x + z_s]);
            }
            workgroupBarrier();
        }
        let m_new: f32 = max(m, z_red_f32[0]);
        workgroupBarrier();
        let p: f32 = select(0.0f, exp(s - m_new), j < S);
        z_p[z_lid.x] = p;
        z_red_f32[z_lid.x] = p;
        workgroupBarrier();
        for (var z_s: u32 = 32u; z_s > 0u; z_s = z_s >> 1u) {
            if (z_lid.x < z_s) {
                z_red_f32[z_lid.x] = z_red_f32[z_lid.x] + z_red_f32[z_lid.x + z_s];
            }
            workgroupBarrier();
        }
        let alpha: f32 = exp(m - m_new);
        l = alpha * l + z_red_f32[0];
        m = m_new;
        let n: i32 = min(64i, S - j0);
        for (var r: i32 = 0i; r < 4i; r = r + 1i) {
            let d: i32 = t + 64i * r;
            if (d < D) {
                var o: f32 = alpha * acc[r];
                for (var jj: i32 = 0i; jj < n; jj = jj + 1i) {
                    o = o + z_p[jj] * f32(V[kv_base + (j0 + jj) * D + d]);
                }
                acc[r] = o;
            }
        }
        workgroupBarrier();
    }
    for (var r: i32 = 0i; r < 4i; r = r + 1i) {
        let d: i32 = t + 64i * r;
        if (d < D) {
            out[q_base + d] = acc[r] / l;
        }
    }
}
