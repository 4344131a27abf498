/**
 * `%%compute` cells of Python notebooks are highlighted as ZynML.
 *
 * An editor extension for code cells: while the cell's first line is `%%compute`, a
 * compartment holds the ZynML language at the highest precedence, so it takes the place of
 * the notebook's language (CodeMirror uses the first `language` it is given); the magic line
 * itself is lexed as a ZynML magic with its annotations. When the magic goes away the
 * compartment empties and the notebook's language is back. Only the editor changes: the
 * cell's mimetype, the saved notebook and what the kernel receives stay as they are.
 */
import { Compartment, EditorState, Extension, Prec, Text } from '@codemirror/state';
import { CodeEditor } from '@jupyterlab/codeeditor';
import { EditorExtensionRegistry, IEditorExtensionRegistry } from '@jupyterlab/codemirror';
import { zynml } from './zynml';

export const COMPUTE_MAGIC = /^\s*%%compute\b/;

/** Whether a cell with this text is a `%%compute` cell. */
export function isComputeCell(text: string): boolean {
  return COMPUTE_MAGIC.test(text);
}

function startOf(doc: Text): string {
  return doc.sliceString(0, Math.min(doc.length, 256));
}

/** The extension: ZynML while the document starts with `%%compute`. */
export function computeCellLanguage(initialText: string): Extension {
  const compartment = new Compartment();
  const languageFor = (compute: boolean): Extension => (compute ? Prec.highest(zynml()) : []);
  return [
    compartment.of(languageFor(isComputeCell(initialText))),
    EditorState.transactionExtender.of(tr => {
      if (!tr.docChanged) {
        return null;
      }
      const was = isComputeCell(startOf(tr.startState.doc));
      const now = isComputeCell(startOf(tr.newDoc));
      return was === now ? null : { effects: compartment.reconfigure(languageFor(now)) };
    })
  ];
}

/** Register the extension for the editors of code cells. */
export function registerComputeCells(registry: IEditorExtensionRegistry): void {
  registry.addExtension({
    name: 'zynbook-zynml:compute-cells',
    factory: (options: { inline: boolean; model: CodeEditor.IModel }) => {
      const model = options.model as CodeEditor.IModel & { type?: string };
      if (model.type !== 'code') {
        return null;
      }
      return EditorExtensionRegistry.createImmutableExtension(
        computeCellLanguage(model.sharedModel.getSource())
      );
    }
  });
}
