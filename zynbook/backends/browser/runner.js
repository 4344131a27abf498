// ZynBook's WebGPU runner: runs a launch plan made by zynbook/backends/browser/plan.py on the
// GPU of the page it is loaded in. One file, used twice: the JupyterLab extension imports it
// (the `browser:N` device), and `zynbook export` inlines it into the exported HTML page
// (each `export` keyword removed). Plain JavaScript with no imports.
//
// A plan (JSON) holds the WGSL of the WebGPU back end and everything to launch it:
//   { hash, kernel, source, bindings: [{binding, buffer, access}],
//     buffers: {name: {size, data}}   size in bytes; data: index of its initial contents
//                                     among the binary buffers sent with the plan, or null
//     passes: [{entry, workgroups: [x, y, z]}], read: [names read back, in order] }
// The runner compiles the module and its pipelines once per source hash, creates the
// buffers, dispatches the passes in order (with timestamp queries where the adapter has
// them), and returns the contents of the `read` buffers.

/** An error of the page's GPU: kind is one of no-webgpu, adapter, lost, compile,
 *  pipeline, limits, validation, out-of-memory, internal. */
export class RunnerError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

const LIMIT_NAMES = [
  'maxBufferSize', 'maxStorageBufferBindingSize', 'maxUniformBufferBindingSize',
  'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY', 'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupsPerDimension', 'maxStorageBuffersPerShaderStage',
  'maxBindGroups', 'maxBindingsPerBindGroup'
];

/** The page's WebGPU adapter and a device on it (the features ZynBook uses, the adapter's
 *  own limits). Throws RunnerError('no-webgpu' | 'adapter'). */
export async function openGPU(gpu) {
  gpu = gpu || (typeof navigator !== 'undefined' ? navigator.gpu : undefined);
  if (!gpu) {
    const secure = typeof isSecureContext === 'undefined' || isSecureContext;
    throw new RunnerError('no-webgpu', secure
      ? 'this browser has no WebGPU (navigator.gpu is missing)'
      : 'WebGPU needs a secure context (https or localhost); this page has none');
  }
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (err) {
    throw new RunnerError('adapter', `requestAdapter failed: ${err}`);
  }
  if (!adapter) {
    throw new RunnerError('no-webgpu', 'the browser offers no WebGPU adapter');
  }
  const wanted = ['timestamp-query'].filter(f => adapter.features.has(f));
  const requiredLimits = {};
  for (const name of LIMIT_NAMES) {
    if (adapter.limits[name] !== undefined) {
      requiredLimits[name] = adapter.limits[name];
    }
  }
  let device;
  try {
    device = await adapter.requestDevice({ requiredFeatures: wanted, requiredLimits });
  } catch (err) {
    throw new RunnerError('adapter', `requestDevice failed: ${err}`);
  }
  return { adapter, device, info: adapterInfo(adapter, device) };
}

/** What the kernel lists for the device: name, limits, features, as the page reports. */
export function adapterInfo(adapter, device) {
  const i = adapter.info || {};
  const limits = {};
  for (const name of LIMIT_NAMES) {
    const v = (device || adapter).limits[name];
    if (v !== undefined) {
      limits[name] = Number(v);
    }
  }
  const name = [i.vendor, i.architecture, i.device, i.description]
    .filter(x => x).join(' ') || 'WebGPU adapter';
  return {
    name,
    vendor: i.vendor || '', architecture: i.architecture || '',
    device: i.device || '', description: i.description || '',
    fallback: Boolean(i.isFallbackAdapter || adapter.isFallbackAdapter),
    features: Array.from(adapter.features).sort(),
    enabled: device ? Array.from(device.features).sort() : [],
    limits,
    user_agent: typeof navigator !== 'undefined' ? navigator.userAgent : ''
  };
}

function compileMessages(info, source) {
  const lines = source.split('\n');
  return info.messages
    .filter(m => m.type === 'error')
    .slice(0, 8)
    .map(m => {
      const text = m.lineNum ? lines[m.lineNum - 1] : undefined;
      return `line ${m.lineNum}:${m.linePos}: ${m.message}` + (text ? `\n    ${text.trim()}` : '');
    })
    .join('\n');
}

function padded(size) {
  return Math.max(16, Math.ceil(size / 16) * 16);
}

export class Runner {
  constructor(gpu) {
    this.gpu = gpu;
    this.device = gpu.device;
    this.pipelines = new Map();
    this.lost = null;
    this.device.lost.then(info => {
      this.lost = `the GPU device was lost (${info.reason || 'unknown'}): ${info.message || ''}`;
      if (this.onLost) {
        this.onLost(this.lost);
      }
    });
  }

  /** The module and pipelines of a plan, compiled once per source hash. */
  async compile(plan) {
    const key = plan.hash;
    const hit = this.pipelines.get(key);
    if (hit) {
      return { compiled: hit, seconds: 0 };
    }
    const t0 = performance.now();
    const dev = this.device;
    dev.pushErrorScope('validation');
    const module = dev.createShaderModule({ label: plan.kernel, code: plan.source });
    const info = await module.getCompilationInfo();
    const scopeError = await dev.popErrorScope();
    if (info.messages.some(m => m.type === 'error') || scopeError) {
      const detail = compileMessages(info, plan.source) || (scopeError && scopeError.message);
      throw new RunnerError('compile', `the WGSL of kernel ${plan.kernel} did not compile:\n${detail}`);
    }
    const layout = dev.createBindGroupLayout({
      entries: plan.bindings.map(b => ({
        binding: b.binding,
        visibility: GPUShaderStage.COMPUTE,
        buffer: {
          type: b.access === 'uniform' ? 'uniform'
            : b.access === 'read' ? 'read-only-storage' : 'storage'
        }
      }))
    });
    const pipelineLayout = dev.createPipelineLayout({ bindGroupLayouts: [layout] });
    const pipelines = {};
    for (const p of plan.passes) {
      if (pipelines[p.entry]) {
        continue;
      }
      try {
        pipelines[p.entry] = await dev.createComputePipelineAsync({
          label: p.entry, layout: pipelineLayout, compute: { module, entryPoint: p.entry }
        });
      } catch (err) {
        throw new RunnerError('pipeline', `pipeline ${p.entry} was refused: ${err.message || err}`);
      }
    }
    const compiled = { layout, pipelines };
    this.pipelines.set(key, compiled);
    return { compiled, seconds: (performance.now() - t0) / 1000 };
  }

  /** Run a plan; `data` holds the initial contents the plan's buffers name (ArrayBuffer
   *  or typed arrays). Resolves to {outputs: [ArrayBuffer], times}. */
  async run(plan, data) {
    if (this.lost) {
      throw new RunnerError('lost', this.lost);
    }
    const t0 = performance.now();
    const dev = this.device;
    const lim = dev.limits;
    const { compiled, seconds } = await this.compile(plan);
    const uses = {};
    for (const b of plan.bindings) {
      uses[b.buffer] = b.access;
    }
    for (const [name, spec] of Object.entries(plan.buffers)) {
      const size = padded(spec.size);
      const bindMax = uses[name] === 'uniform' ? lim.maxUniformBufferBindingSize
        : lim.maxStorageBufferBindingSize;
      if (size > lim.maxBufferSize || size > bindMax) {
        throw new RunnerError('limits', `\`${name}\` needs ${size} bytes; the adapter binds at ` +
          `most ${Math.min(lim.maxBufferSize, bindMax)} bytes per buffer`);
      }
    }
    for (const p of plan.passes) {
      if (p.workgroups.some(n => n > lim.maxComputeWorkgroupsPerDimension)) {
        throw new RunnerError('limits', `pass ${p.entry} dispatches ${p.workgroups.join(' x ')} ` +
          `workgroups; the adapter allows ${lim.maxComputeWorkgroupsPerDimension} per dimension`);
      }
    }
    dev.pushErrorScope('out-of-memory');
    dev.pushErrorScope('validation');
    const made = [];
    const buffers = {};
    const S = GPUBufferUsage;
    for (const [name, spec] of Object.entries(plan.buffers)) {
      const usage = uses[name] === 'uniform' ? S.UNIFORM | S.COPY_DST
        : S.STORAGE | S.COPY_SRC | S.COPY_DST;
      const buf = dev.createBuffer({ label: name, size: padded(spec.size), usage });
      made.push(buf);
      buffers[name] = buf;
      if (spec.data !== null && spec.data !== undefined) {
        const src = data[spec.data];
        const bytes = src instanceof ArrayBuffer ? new Uint8Array(src)
          : new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
        const n = bytes.byteLength - (bytes.byteLength % 4);
        if (n > 0) {
          dev.queue.writeBuffer(buf, 0, bytes, 0, n);
        }
        if (n < bytes.byteLength) {        // a tail of 1-3 bytes, padded to a word
          const tail = new Uint8Array(4);
          tail.set(bytes.subarray(n));
          dev.queue.writeBuffer(buf, n, tail);
        }
      }
    }
    const group = dev.createBindGroup({
      layout: compiled.layout,
      entries: plan.bindings.map(b => ({ binding: b.binding, resource: { buffer: buffers[b.buffer] } }))
    });
    const passes = plan.passes.filter(p => p.workgroups.every(n => n > 0));
    const timed = dev.features.has('timestamp-query') && passes.length > 0;
    const encoder = dev.createCommandEncoder();
    let querySet = null;
    let resolve = null;
    if (timed) {
      querySet = dev.createQuerySet({ type: 'timestamp', count: 2 * passes.length });
      resolve = dev.createBuffer({ size: 16 * passes.length, usage: S.QUERY_RESOLVE | S.COPY_SRC });
      made.push(resolve);
    }
    passes.forEach((p, n) => {
      const desc = { label: p.entry };
      if (timed) {
        desc.timestampWrites = { querySet, beginningOfPassWriteIndex: 2 * n,
          endOfPassWriteIndex: 2 * n + 1 };
      }
      const pass = encoder.beginComputePass(desc);
      pass.setPipeline(compiled.pipelines[p.entry]);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(p.workgroups[0], p.workgroups[1], p.workgroups[2]);
      pass.end();
    });
    const staging = plan.read.map(name => {
      const size = buffers[name].size;
      const st = dev.createBuffer({ size, usage: S.MAP_READ | S.COPY_DST });
      made.push(st);
      encoder.copyBufferToBuffer(buffers[name], 0, st, 0, size);
      return st;
    });
    let tsStage = null;
    if (timed) {
      encoder.resolveQuerySet(querySet, 0, 2 * passes.length, resolve, 0);
      tsStage = dev.createBuffer({ size: 16 * passes.length, usage: S.MAP_READ | S.COPY_DST });
      made.push(tsStage);
      encoder.copyBufferToBuffer(resolve, 0, tsStage, 0, 16 * passes.length);
    }
    const tSubmit = performance.now();
    dev.queue.submit([encoder.finish()]);
    const validation = await dev.popErrorScope();
    const oom = await dev.popErrorScope();
    if (validation || oom) {
      made.forEach(b => b.destroy());
      if (querySet) {
        querySet.destroy();
      }
      const err = validation || oom;
      throw new RunnerError(validation ? 'validation' : 'out-of-memory', err.message);
    }
    try {
      await Promise.all(staging.concat(tsStage ? [tsStage] : []).map(b => b.mapAsync(GPUMapMode.READ)));
    } catch (err) {
      made.forEach(b => b.destroy());
      throw new RunnerError(this.lost ? 'lost' : 'internal',
        this.lost || `reading the results back failed: ${err.message || err}`);
    }
    const tDone = performance.now();
    const outputs = plan.read.map((name, n) =>
      staging[n].getMappedRange(0, Math.ceil(plan.buffers[name].size / 4) * 4 || 4).slice(0));
    let kernelNs = null;
    if (tsStage) {
      const t = new BigUint64Array(tsStage.getMappedRange());
      let total = 0n;
      let valid = true;
      for (let n = 0; n < passes.length; n++) {
        const span = t[2 * n + 1] - t[2 * n];
        if (span < 0n || t[2 * n] === 0n) {
          valid = false;
        }
        total += span;
      }
      kernelNs = valid ? Number(total) : null;
    }
    made.forEach(b => b.destroy());
    if (querySet) {
      querySet.destroy();
    }
    return {
      outputs,
      times: {
        compile: seconds,
        kernel: kernelNs !== null ? kernelNs * 1e-9 : (tDone - tSubmit) / 1000,
        source: kernelNs !== null ? 'gpu-timestamps' : 'page-clock',
        page: (performance.now() - t0) / 1000
      }
    };
  }
}
