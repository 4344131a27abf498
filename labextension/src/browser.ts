/**
 * The page's own GPU as a ZynML device (`browser:N`).
 *
 * For each kernel of an open notebook that has the `zynbook.browser` comm target (the ZynML
 * kernel always; a Python kernel after `%load_ext zynbook`), the page opens one comm and
 * sends its WebGPU adapter's description (or why it has none). The kernel then sends
 * launches on that comm: a JSON plan (the WGSL of the WebGPU back end, bindings, dispatches)
 * and binary buffers (uniforms and inputs); the runner (runner.js, shared with `zynbook
 * export`) compiles the pipelines once per source hash, dispatches, reads back and the page
 * replies with the output buffers and GPU timestamps, or with an error of a kind the kernel
 * turns into a ZynML device error. Comm messages travel over a kernel subshell (JupyterLab's
 * default where the kernel has them), so the kernel reads the reply while the cell that
 * launched waits. Leaving the page closes the comms: the kernel drops the device.
 */
import { ISessionContext, Notification } from '@jupyterlab/apputils';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';

// runner.js is plain JavaScript kept beside the Python back end (zynbook export inlines it)
// @ts-ignore: no declaration file; its API is described by IRunner below
import * as runnerModule from '../../zynbook/backends/browser/runner.js';

/** The command that exports the current notebook as a live WebGPU page. */
export const EXPORT_COMMAND = 'zynbook:export-live-page';

/**
 * `zynbook export` of a notebook, run by its kernel (the notebook saved first): the page is
 * written next to the notebook; a notification links to it.
 */
export async function exportLivePage(panel: NotebookPanel): Promise<string | null> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel) {
    Notification.error('Export as live page: the notebook has no kernel');
    return null;
  }
  await panel.context.save();
  const path = panel.context.path;
  const name = path.split('/').pop() ?? path;
  const future = kernel.requestExecute(
    {
      code: '',
      silent: true,
      store_history: false,
      user_expressions: {
        zynbook_export:
          "str(__import__('zynbook.export', fromlist=['x']).export_notebook(" +
          JSON.stringify(name) +
          ').name)'
      }
    },
    true
  );
  const reply = (await future.done).content as KernelMessage.IExecuteReplyMsg['content'];
  const result = (reply.status === 'ok'
    ? (reply.user_expressions ?? {})['zynbook_export']
    : null) as any;
  if (!result || result.status !== 'ok') {
    const why = result ? `${result.ename}: ${result.evalue}` : 'the kernel failed';
    Notification.error(`Export as live page failed: ${why}`);
    return null;
  }
  const written = String(result.data['text/plain']).replace(/^['"]|['"]$/g, '');
  const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/') + 1) : '';
  const url = `${baseUrl()}files/${(dir + written).split('/').map(encodeURIComponent).join('/')}`;
  Notification.success(`Wrote ${dir}${written}: it runs the compute blocks on the reader's GPU`, {
    actions: [{ label: 'Open', callback: () => window.open(url, '_blank') }],
    autoClose: 10000
  });
  return dir + written;
}

/** The server's base URL, as JupyterLab's page configuration gives it. */
function baseUrl(): string {
  try {
    const el = document.getElementById('jupyter-config-data');
    const base = String(JSON.parse(el?.textContent ?? '{}').baseUrl ?? '/');
    return base.endsWith('/') ? base : base + '/';
  } catch {
    return '/';
  }
}

/** The comm target the kernel registers. */
export const BROWSER_COMM_TARGET = 'zynbook.browser';

interface IRunResult {
  outputs: ArrayBuffer[];
  times: { [key: string]: unknown };
}

interface IRunner {
  run(plan: unknown, data: unknown[]): Promise<IRunResult>;
  onLost?: (message: string) => void;
}

interface IPageGPU {
  runner?: IRunner;
  adapter?: { [key: string]: unknown };
  error?: { kind: string; message: string };
}

const runnerApi = runnerModule as unknown as {
  openGPU(): Promise<{ info: { [key: string]: unknown } }>;
  Runner: new (gpu: unknown) => IRunner;
};

let gpuPromise: Promise<IPageGPU> | null = null;
const links = new Map<string, KernelLink>();

/** The page's GPU, opened once for all kernels. */
export function pageGPU(): Promise<IPageGPU> {
  if (!gpuPromise) {
    gpuPromise = runnerApi.openGPU().then(
      gpu => {
        const runner = new runnerApi.Runner(gpu);
        runner.onLost = (message: string) => {
          for (const link of links.values()) {
            link.send({ type: 'lost', message });
          }
        };
        return { runner, adapter: gpu.info };
      },
      (err: any) => ({
        error: { kind: String(err?.kind ?? 'no-webgpu'), message: String(err?.message ?? err) }
      })
    );
  }
  return gpuPromise;
}

/** The comm between this page and one kernel. */
class KernelLink {
  constructor(kernel: Kernel.IKernelConnection) {
    this.kernel = kernel;
  }

  get connected(): boolean {
    return this.comm !== null;
  }

  /** Launches running on this page for this kernel. */
  get inFlight(): number {
    return this.inflight.size;
  }

  /** Open the comm if the kernel has the target and none is open. */
  async connect(): Promise<void> {
    if (this.comm || this.connecting || this.kernel.isDisposed) {
      return;
    }
    this.connecting = true;
    try {
      if (!(await this.hasTarget())) {
        return;
      }
      const gpu = await pageGPU();
      const comm = this.kernel.createComm(BROWSER_COMM_TARGET);
      if (this.kernel.supportsSubshells) {
        await (comm as any).subshellStarted;
      }
      comm.onMsg = msg => this.onMsg(msg);
      comm.onClose = () => {
        if (this.comm === comm) {
          this.comm = null;
        }
      };
      this.comm = comm;
      const hello: any = gpu.adapter ? { adapter: gpu.adapter } : { error: gpu.error };
      await comm.open({ type: 'hello', ...hello }).done;
    } catch (reason) {
      console.warn('zynbook: could not connect the browser device', reason);
      this.comm = null;
    } finally {
      this.connecting = false;
    }
  }

  /** Whether the kernel registered the comm target (a silent user expression that
   *  imports nothing). */
  private async hasTarget(): Promise<boolean> {
    const future = this.kernel.requestExecute(
      {
        code: '',
        silent: true,
        store_history: false,
        user_expressions: {
          // no import: a kernel that has not loaded zynbook stays as it is
          zynbook_browser:
            "getattr(__import__('sys').modules.get('zynbook.backends.browser.bridge'), " +
            "'_registered', False)"
        }
      },
      true
    );
    const reply = (await future.done).content as KernelMessage.IExecuteReplyMsg['content'];
    if (reply.status !== 'ok') {
      return false;
    }
    const result = (reply.user_expressions ?? {})['zynbook_browser'] as any;
    return Boolean(result && result.status === 'ok' && result.data['text/plain'] === 'True');
  }

  /**
   * Send a reply, in parts of at most CHUNK bytes: the server refuses websocket messages
   * from the page over its limit (10 MiB by default), so a large reply travels as several
   * comm messages the kernel puts back together.
   */
  sendReply(data: any, buffers: ArrayBuffer[]): void {
    const sizes = buffers.map(b => b.byteLength);
    const total = sizes.reduce((a, b) => a + b, 0);
    if (total <= CHUNK) {
      this.send({ ...data, sizes }, buffers);
      return;
    }
    const whole = new Uint8Array(total);
    let at = 0;
    for (const b of buffers) {
      whole.set(new Uint8Array(b), at);
      at += b.byteLength;
    }
    const parts = Math.ceil(total / CHUNK);
    for (let k = 0; k < parts; k++) {
      const piece = whole.slice(k * CHUNK, Math.min(total, (k + 1) * CHUNK)).buffer;
      this.send({ ...data, sizes, part: k, parts }, [piece]);
    }
  }

  send(data: any, buffers: (ArrayBuffer | ArrayBufferView)[] = []): void {
    if (this.comm && !this.comm.isDisposed) {
      try {
        this.comm.send(data, undefined, buffers);
      } catch (reason) {
        console.warn('zynbook: browser device send failed', reason);
      }
    }
  }

  close(): void {
    if (this.comm && !this.comm.isDisposed) {
      try {
        this.comm.close({ reason: 'the page was closed' });
      } catch {
        // the kernel connection is gone already
      }
    }
    this.comm = null;
  }

  private onMsg(msg: KernelMessage.ICommMsgMsg): void {
    const data = (msg.content.data ?? {}) as any;
    const buffers = (msg.buffers ?? []) as unknown[];
    switch (data.type) {
      case 'ping':
        // the launches still running here: a request the kernel waits for and that is
        // neither running nor answered was lost on the way
        this.send({ type: 'pong', id: 0, seq: data.seq, busy: Array.from(this.inflight) });
        break;
      case 'echo':
        // the page's clock (the same machine's clock where the kernel runs beside it)
        this.sendReply({ type: 'echo', id: data.id, received_ms: Date.now() },
          buffers.map(asArrayBuffer));
        break;
      case 'cancel':
        this.cancelled.add(data.id);
        break;
      case 'launch':
        received += 1;
        this.inflight.add(data.id);
        void this.launch(data.id, data.plan, buffers).finally(() => this.inflight.delete(data.id));
        break;
      default:
        break;
    }
  }

  private async launch(id: number, plan: any, buffers: unknown[]): Promise<void> {
    const gpu = await pageGPU();
    let reply: any;
    let out: ArrayBuffer[] = [];
    if (!gpu.runner) {
      reply = { type: 'error', id, ...gpu.error };
    } else {
      try {
        const result = await gpu.runner.run(plan, buffers);
        reply = { type: 'result', id, times: result.times };
        out = result.outputs;
      } catch (err: any) {
        reply = {
          type: 'error',
          id,
          kind: String(err?.kind ?? 'internal'),
          message: String(err?.message ?? err)
        };
      }
    }
    if (this.cancelled.delete(id)) {
      return;
    }
    this.sendReply(reply, out);
  }

  readonly kernel: Kernel.IKernelConnection;
  private comm: Kernel.IComm | null = null;
  private connecting = false;
  private cancelled = new Set<number>();
  private inflight = new Set<number>();
}

/** The largest reply message the page sends (the server's default limit is 10 MiB). */
const CHUNK = 4 << 20;

function asArrayBuffer(b: unknown): ArrayBuffer {
  if (b instanceof ArrayBuffer) {
    return b;
  }
  const v = b as ArrayBufferView;
  return v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength) as ArrayBuffer;
}

function linkFor(kernel: Kernel.IKernelConnection): KernelLink {
  let link = links.get(kernel.id);
  if (!link || link.kernel !== kernel) {
    link?.close();
    link = new KernelLink(kernel);
    links.set(kernel.id, link);
  }
  return link;
}

/** Connects the page to the kernel of one notebook panel, and again after a restart. */
export class BrowserDeviceLink implements IDisposable {
  constructor(panel: NotebookPanel) {
    this.panel = panel;
    const ctx = panel.sessionContext;
    ctx.kernelChanged.connect(this.poke, this);
    ctx.statusChanged.connect(this.onStatus, this);
    NotebookActions.executed.connect(this.onExecuted, this);
    void ctx.ready.then(() => this.poke());
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    NotebookActions.executed.disconnect(this.onExecuted, this);
  }

  private poke(): void {
    const kernel = this.panel.sessionContext.session?.kernel;
    if (kernel && !this._disposed) {
      void linkFor(kernel).connect();
    }
  }

  private onStatus(_: ISessionContext, status: Kernel.Status): void {
    const kernel = this.panel.sessionContext.session?.kernel;
    if (status === 'restarting' || status === 'autorestarting') {
      if (kernel) {
        links.get(kernel.id)?.close();
        links.delete(kernel.id);
      }
      this.restarted = true;
    } else if (status === 'idle' && this.restarted) {
      // once after a restart (never on every idle: the check itself makes the kernel busy)
      this.restarted = false;
      this.poke();
    }
  }

  private onExecuted(_: unknown, args: { notebook: unknown }): void {
    if (args.notebook === this.panel.content) {
      this.poke();
    }
  }

  private panel: NotebookPanel;
  private _disposed = false;
  private restarted = false;
}

let received = 0;

/** Launches the page runs now and has received in all, for all kernels (tests wait on it). */
export function launchesInFlight(): { running: number; received: number } {
  let running = 0;
  for (const link of links.values()) {
    running += link.inFlight;
  }
  return { running, received };
}

// leaving the page: every kernel drops this page's device at once
if (typeof window !== 'undefined') {
  (window as any).zynbookLaunchesInFlight = launchesInFlight;
  window.addEventListener('pagehide', () => {
    for (const link of links.values()) {
      link.close();
    }
  });
}
