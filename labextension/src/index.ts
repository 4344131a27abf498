/**
 * zynbook-zynml: ZynML in JupyterLab.
 *
 * - `zynbook-zynml:language`: ZynML as an editor language (mimetype `text/x-zynml`, the ZynML
 *   kernel's `codemirror_mode` `zynml`) and the `.zyn` file type;
 * - `zynbook-zynml:compute-cells`: `%%compute` cells of Python notebooks highlighted as ZynML;
 * - `zynbook-zynml:device-toolbar`: the default-device item in the toolbar of ZynML notebooks,
 *   and the progress item of slow ZynML cells (any notebook whose kernel reports progress);
 * - `zynbook-zynml:browser-device`: the page's WebGPU adapter as the kernel's `browser:N`
 *   device, and the command that exports a notebook as a live WebGPU page.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IEditorExtensionRegistry, IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';

import { BrowserDeviceLink, EXPORT_COMMAND, exportLivePage } from './browser';
import { registerComputeCells } from './computecells';
import { DeviceToolbarItem } from './devices';
import { ProgressToolbarItem } from './progress';
import { zynml, ZYNML_MIME } from './zynml';

export { zynml, zynmlParser, ZYNML_MIME } from './zynml';
export { computeCellLanguage, isComputeCell } from './computecells';
export { DEVICE_COMM_TARGET, DEVICE_QUERY, decodeDeviceState } from './devices';
export { PROGRESS_COMM_TARGET } from './progress';
export { BROWSER_COMM_TARGET, pageGPU } from './browser';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">
  <rect class="jp-icon3" fill="#616161" x="1" y="1" width="14" height="14" rx="3"/>
  <path fill="#fff" d="M4.5 4.5h7v1.4L6.6 10.1h4.9v1.4h-7v-1.4l4.9-4.2H4.5z"/>
</svg>`;

export const zynmlIcon = new LabIcon({ name: 'zynbook-zynml:zynml', svgstr: ICON_SVG });

const language: JupyterFrontEndPlugin<void> = {
  id: 'zynbook-zynml:language',
  description: 'ZynML as an editor language: ZynML cells and .zyn files are highlighted.',
  autoStart: true,
  requires: [IEditorLanguageRegistry],
  activate: (app: JupyterFrontEnd, languages: IEditorLanguageRegistry) => {
    languages.addLanguage({
      name: 'zynml',
      displayName: 'ZynML',
      alias: ['zyn'],
      mime: ZYNML_MIME,
      extensions: ['zyn'],
      load: async () => zynml()
    });
    app.docRegistry.addFileType({
      name: 'zynml',
      displayName: 'ZynML',
      extensions: ['.zyn'],
      mimeTypes: [ZYNML_MIME],
      fileFormat: 'text',
      contentType: 'file',
      icon: zynmlIcon
    });
  }
};

const computeCells: JupyterFrontEndPlugin<void> = {
  id: 'zynbook-zynml:compute-cells',
  description: '%%compute cells of Python notebooks are highlighted as ZynML.',
  autoStart: true,
  requires: [IEditorExtensionRegistry],
  activate: (app: JupyterFrontEnd, extensions: IEditorExtensionRegistry) => {
    registerComputeCells(extensions);
  }
};

class DeviceToolbarExtension
  implements DocumentRegistry.IWidgetExtension<NotebookPanel, INotebookModel>
{
  createNew(panel: NotebookPanel): IDisposable {
    const item = new DeviceToolbarItem(panel);
    panel.toolbar.insertItem(10, 'zynmlDevice', item);
    const progress = new ProgressToolbarItem(panel);
    panel.toolbar.insertItem(11, 'zynmlProgress', progress);
    return new DisposableDelegate(() => {
      item.dispose();
      progress.dispose();
    });
  }
}

const deviceToolbar: JupyterFrontEndPlugin<void> = {
  id: 'zynbook-zynml:device-toolbar',
  description: 'Shows and picks the default compute device of ZynML notebooks.',
  autoStart: true,
  activate: (app: JupyterFrontEnd) => {
    app.docRegistry.addWidgetExtension('Notebook', new DeviceToolbarExtension());
  }
};

class BrowserDeviceExtension
  implements DocumentRegistry.IWidgetExtension<NotebookPanel, INotebookModel>
{
  createNew(panel: NotebookPanel): IDisposable {
    return new BrowserDeviceLink(panel);
  }
}

const browserDevice: JupyterFrontEndPlugin<void> = {
  id: 'zynbook-zynml:browser-device',
  description: "The page's WebGPU adapter as the kernel's browser:N device.",
  autoStart: true,
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, palette: ICommandPalette | null) => {
    app.docRegistry.addWidgetExtension('Notebook', new BrowserDeviceExtension());
    // File > Export as Live WebGPU Page (schema/browser-device.json), the notebook's
    // context menu and the palette: `zynbook export` of the current notebook
    app.commands.addCommand(EXPORT_COMMAND, {
      label: 'Export as Live WebGPU Page (ZynBook)',
      caption: "An HTML page that runs the notebook's compute blocks on the reader's GPU",
      isEnabled: () => app.shell.currentWidget instanceof NotebookPanel,
      execute: () => {
        const widget = app.shell.currentWidget;
        if (widget instanceof NotebookPanel) {
          return exportLivePage(widget);
        }
      }
    });
    app.contextMenu.addItem({ command: EXPORT_COMMAND, selector: '.jp-Notebook', rank: 90 });
    palette?.addItem({ command: EXPORT_COMMAND, category: 'ZynBook' });
  }
};

export default [language, computeCells, deviceToolbar, browserDevice];
