/**
 * The default-device toolbar item of ZynML notebooks.
 *
 * It asks the notebook's kernel which devices `zynbook.compute_devices()` lists and which one
 * is the default (a silent execute request whose user expression returns them as JSON), and
 * sets the default with the kernel's own `%device ID` line magic, so a choice made here is
 * exactly what `%device` in a cell does. It shows only while the kernel's language is ZynML
 * and follows `%device` cells and `config { compute_device }` after every executed cell,
 * and, at once, any change the kernel announces on the `zynbook.device` comm (a device-picker
 * widget, `%device` from anywhere): the picker, the toolbar and `%device` show one state.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

/** One entry of `compute_devices()`. */
export interface IDeviceInfo {
  id: string;
  type?: string;
  name?: string;
  [key: string]: unknown;
}

export interface IDeviceState {
  default: string;
  devices: IDeviceInfo[];
}

/**
 * A Python expression (user expressions are evaluated by IPython in the kernel's namespace):
 * the default device and the device list, as base64 of JSON so that the `text/plain` repr
 * the kernel sends back is a plain quoted string.
 */
export const DEVICE_QUERY =
  "__import__('base64').b64encode(__import__('json').dumps({" +
  "'default': __import__('zynbook.kernel.state', fromlist=['notebook_session'])" +
  '.notebook_session().default_device, ' +
  "'devices': __import__('zynbook').compute_devices()}, default=str).encode()).decode()";

/** The comm target on which the kernel announces a new default device. */
export const DEVICE_COMM_TARGET = 'zynbook.device';

/** Decode the `text/plain` of DEVICE_QUERY's result. */
export function decodeDeviceState(plain: string): IDeviceState {
  const b64 = plain.trim().replace(/^['"]|['"]$/g, '');
  const data = JSON.parse(atob(b64));
  return { default: String(data.default), devices: data.devices as IDeviceInfo[] };
}

export function deviceLabel(info: IDeviceInfo): string {
  const name = info.name ? ` · ${info.name}` : '';
  return `${info.id}${name}`;
}

async function execute(
  kernel: Kernel.IKernelConnection,
  content: KernelMessage.IExecuteRequestMsg['content']
): Promise<KernelMessage.IExecuteReplyMsg['content']> {
  const future = kernel.requestExecute(content, true);
  const reply = await future.done;
  return reply.content as KernelMessage.IExecuteReplyMsg['content'];
}

/** Ask the kernel for the devices and the default device. */
export async function queryDevices(kernel: Kernel.IKernelConnection): Promise<IDeviceState> {
  const reply = await execute(kernel, {
    code: '',
    silent: true,
    store_history: false,
    user_expressions: { zynbook_devices: DEVICE_QUERY }
  });
  if (reply.status !== 'ok') {
    throw new Error(`${reply.status}`);
  }
  const result = (reply.user_expressions ?? {})['zynbook_devices'] as any;
  if (!result || result.status !== 'ok') {
    throw new Error(result ? `${result.ename}: ${result.evalue}` : 'no answer');
  }
  return decodeDeviceState(String(result.data['text/plain']));
}

/** Run `%device ID` in the kernel; resolves to an error message, or null when it worked. */
export async function setDevice(
  kernel: Kernel.IKernelConnection,
  device: string
): Promise<string | null> {
  const reply = await execute(kernel, {
    code: `%device ${device}`,
    silent: true,
    store_history: false
  });
  if (reply.status === 'ok') {
    return null;
  }
  const err = reply as KernelMessage.IReplyErrorContent;
  return `${err.ename}: ${err.evalue}`;
}

/** Whether the session's kernel speaks ZynML. */
export async function isZynMLKernel(sessionContext: ISessionContext): Promise<boolean> {
  const kernel = sessionContext.session?.kernel;
  if (!kernel) {
    return false;
  }
  const info = await kernel.info;
  return info.language_info?.name === 'zynml';
}

/** The toolbar item: a label and a select of the kernel's devices. */
export class DeviceToolbarItem extends Widget {
  constructor(panel: NotebookPanel) {
    super();
    this.panel = panel;
    this.addClass('zyn-DeviceToolbarItem');
    this.node.title = 'Default compute device of this ZynML notebook (%device)';
    const label = document.createElement('span');
    label.className = 'zyn-DeviceToolbarItem-label';
    label.textContent = 'device';
    const wrapper = document.createElement('div');
    wrapper.className = 'jp-HTMLSelect jp-DefaultStyle jp-Notebook-toolbarCellTypeDropdown';
    this.select = document.createElement('select');
    this.select.setAttribute('aria-label', 'Default compute device');
    wrapper.appendChild(this.select);
    this.node.append(label, wrapper);
    this.select.addEventListener('change', () => void this.pick(this.select.value));
    this.hide();

    const ctx = panel.sessionContext;
    ctx.kernelChanged.connect(this.onKernel, this);
    ctx.statusChanged.connect(this.onStatus, this);
    NotebookActions.executed.connect(this.onExecuted, this);
    void ctx.ready.then(() => this.onKernel());
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    NotebookActions.executed.disconnect(this.onExecuted, this);
    super.dispose();
  }

  /** The devices and default last read from the kernel. */
  get state(): IDeviceState | null {
    return this._state;
  }

  private onKernel(): void {
    this._state = null;
    this._active = false;
    const kernel = this.panel.sessionContext.session?.kernel;
    if (kernel && kernel !== this._listening) {
      this._listening = kernel;
      kernel.registerCommTarget(DEVICE_COMM_TARGET, (comm, msg) => {
        const data = (msg.content.data ?? {}) as { default?: string };
        if (data.default) {
          this.follow(String(data.default));
        }
      });
    }
    void this.refresh();
  }

  /** Show `device` as the default: the kernel announced it (a picker, `%device`). */
  follow(device: string): void {
    if (!this._state) {
      void this.refresh();
      return;
    }
    this._state = { ...this._state, default: device };
    this.render();
    this.node.classList.remove('zyn-mod-error');
    this.node.title = `Default compute device: ${device}`;
  }

  private onStatus(_: ISessionContext, status: Kernel.Status): void {
    // a restarted kernel starts with the default device again
    if (status === 'restarting' || status === 'autorestarting') {
      this._state = null;
    } else if (status === 'idle' && !this._state && !this._pending) {
      void this.refresh();
    }
  }

  private onExecuted(_: unknown, args: { notebook: unknown }): void {
    if (args.notebook === this.panel.content && this._active) {
      void this.refresh();
    }
  }

  /** Read the devices and default from the kernel (hides the item unless it is ZynML). */
  async refresh(): Promise<void> {
    const ctx = this.panel.sessionContext;
    const kernel = ctx.session?.kernel;
    if (!kernel || this._pending) {
      return;
    }
    this._pending = true;
    try {
      this._active = await isZynMLKernel(ctx);
      if (!this._active) {
        this.hide();
        return;
      }
      this._state = await queryDevices(kernel);
      this.render();
      this.show();
    } catch (reason) {
      this.node.title = `Could not read the devices: ${reason}`;
    } finally {
      this._pending = false;
    }
  }

  /** Make `device` the default (as `%device DEVICE` does). */
  async pick(device: string): Promise<void> {
    const kernel = this.panel.sessionContext.session?.kernel;
    if (!kernel) {
      return;
    }
    const error = await setDevice(kernel, device);
    this.node.classList.toggle('zyn-mod-error', error !== null);
    this.node.title = error ?? `Default compute device: ${device}`;
    await this.refresh();
  }

  private render(): void {
    const state = this._state;
    if (!state) {
      return;
    }
    const ids = state.devices.map(d => d.id);
    const options: IDeviceInfo[] = [...state.devices];
    if (!ids.includes('auto')) {
      options.push({ id: 'auto', name: 'the best GPU, else the CPU' });
    }
    if (!options.some(d => d.id === state.default)) {
      options.unshift({ id: state.default });
    }
    this.select.replaceChildren(
      ...options.map(d => {
        const option = document.createElement('option');
        option.value = d.id;
        option.textContent = deviceLabel(d);
        return option;
      })
    );
    this.select.value = state.default;
    this.node.dataset.device = state.default;
  }

  readonly select: HTMLSelectElement;
  private panel: NotebookPanel;
  private _state: IDeviceState | null = null;
  private _active = false;
  private _pending = false;
  private _listening: Kernel.IKernelConnection | null = null;
}
