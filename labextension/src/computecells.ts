/**
 * `%%compute` cells of Python notebooks are highlighted as ZynML.
 *
 * A cell's editor language follows its model's mimetype, which the notebook sets from the
 * kernel's language for every code cell. For a cell whose first line is `%%compute`, this sets
 * it to ZynML instead (the magic line itself is lexed as a ZynML magic with its annotations),
 * and back to the notebook's language when the magic goes away. Only the editor changes:
 * the mimetype is not saved and the kernel still receives the cell as it is.
 */
import { Cell, ICellModel } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { ZYNML_MIME } from './zynml';

export const COMPUTE_MAGIC = /^\s*%%compute\b/;

/** The mimetype a cell's editor should use in a notebook whose code cells use `notebookMime`. */
export function cellMimeType(source: string, notebookMime: string): string {
  return notebookMime !== ZYNML_MIME && COMPUTE_MAGIC.test(source) ? ZYNML_MIME : notebookMime;
}

/** Keep the mimetype of every code cell of `panel` in line with `cellMimeType`. */
export function watchComputeCells(panel: NotebookPanel): void {
  const notebook = panel.content;
  const watched = new WeakSet<ICellModel>();

  const apply = (cell: Cell): void => {
    const model = cell.model;
    if (model.type !== 'code') {
      return;
    }
    if (!watched.has(model)) {
      watched.add(model);
      // the notebook resets every cell's mimetype when the kernel's language changes
      model.mimeTypeChanged.connect(() => requestAnimationFrame(() => apply(cell)));
    }
    const want = cellMimeType(model.sharedModel.getSource(), notebook.codeMimetype);
    if (model.mimeType !== want) {
      model.mimeType = want;
    }
  };
  const applyAll = (): void => {
    if (!notebook.isDisposed) {
      notebook.widgets.forEach(apply);
    }
  };
  notebook.modelContentChanged.connect(applyAll);
  notebook.activeCellChanged.connect(applyAll);
  void panel.context.ready.then(applyAll);
}
