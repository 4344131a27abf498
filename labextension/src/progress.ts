/**
 * The progress item of notebooks: while a ZynML cell runs for more than about a second (a
 * long compile, a slow kernel), the kernel reports on the `zynbook.progress` comm which
 * kernel runs on which device, how many launches are done and the time so far
 * (zynbook/kernel/progress.py). The item shows that text with a running bar in the
 * notebook's toolbar; when the cell ends it keeps the cell's time (dimmed) until the next slow
 * cell. Nothing is written into the cell's outputs.
 */
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

export const PROGRESS_COMM_TARGET = 'zynbook.progress';

export interface IProgress {
  text: string;
  kernel?: string;
  device?: string;
  launches?: number;
  elapsed?: number;
  done?: boolean;
}

export class ProgressToolbarItem extends Widget {
  constructor(panel: NotebookPanel) {
    super();
    this.panel = panel;
    this.addClass('zyn-ProgressItem');
    this.bar = document.createElement('span');
    this.bar.className = 'zyn-ProgressItem-bar';
    this.label = document.createElement('span');
    this.label.className = 'zyn-ProgressItem-label';
    this.node.append(this.bar, this.label);
    this.hide();
    const ctx = panel.sessionContext;
    ctx.kernelChanged.connect(this.onKernel, this);
    void ctx.ready.then(() => this.onKernel());
  }

  private onKernel(): void {
    const kernel = this.panel.sessionContext.session?.kernel;
    if (!kernel || kernel === this._listening) {
      return;
    }
    this._listening = kernel;
    kernel.registerCommTarget(PROGRESS_COMM_TARGET, (comm, msg) => {
      this.update_(msg.content.data as unknown as IProgress);
      comm.onMsg = m => this.update_(m.content.data as unknown as IProgress);
    });
  }

  /** Show one progress message (public for tests). */
  update_(data: IProgress): void {
    this.label.textContent = data.text;
    this.node.title = data.text;
    this.node.dataset.kernel = data.kernel ?? '';
    this.node.classList.toggle('zyn-mod-done', !!data.done);
    this.show();
  }

  private panel: NotebookPanel;
  private bar: HTMLSpanElement;
  private label: HTMLSpanElement;
  private _listening: Kernel.IKernelConnection | null = null;
}
