/**
 * ZynML for CodeMirror 6: a stream parser and its language support.
 *
 * The word lists mirror the Pygments lexer of the Python package (zynbook/highlight.py), so
 * a cell looks the same in JupyterLab as in nbconvert's HTML and in the shader inspector.
 *
 * Besides the standard highlighting tags (which JupyterLab's theme colours), every token
 * carries `tok-*` classes (`classHighlighter`) and the ZynML-specific ones carry `zyn-*`
 * classes: `zyn-annotation` (@kernel, @device...), `zyn-kernel-type` (matmul, reduce...),
 * `zyn-type` (f32, tensor...) and `zyn-magic` (%device, %%python...).
 *
 * Cells of the ZynML kernel may hold Python: `%%python` on the first line makes the whole
 * cell Python and `%python` makes the rest of its line Python; both are highlighted with
 * CodeMirror's Python mode.
 */
import {
  HighlightStyle,
  LanguageSupport,
  StreamLanguage,
  StreamParser,
  StringStream,
  syntaxHighlighting
} from '@codemirror/language';
import { python } from '@codemirror/legacy-modes/mode/python';
import { classHighlighter, Tag, tagHighlighter, tags } from '@lezer/highlight';

export const ZYNML_MIME = 'text/x-zynml';

export const KEYWORDS = [
  'let',
  'var',
  'for',
  'in',
  'if',
  'elif',
  'else',
  'pipeline',
  'return',
  'yield',
  'await',
  'timeout',
  'compute',
  'config',
  'shared',
  'step',
  'and',
  'or',
  'not'
];
export const CONSTANTS = ['true', 'false', 'inf'];
export const KERNEL_TYPES = [
  'elementwise',
  'reduce',
  'matmul',
  'batched_matmul',
  'conv2d',
  'conv2d_depthwise',
  'attention',
  'flash_attention',
  'fused'
];
export const ANNOTATIONS = [
  'kernel',
  'device',
  'async',
  'workgroup',
  'shared',
  'tile',
  'broadcast',
  'parallel',
  'autotune'
];
export const TYPE_NAMES = [
  'tensor',
  'f16',
  'bf16',
  'f32',
  'f64',
  'i8',
  'i16',
  'i32',
  'i64',
  'u8',
  'u16',
  'u32',
  'u64',
  'bool',
  'int',
  'float',
  'str',
  'float16',
  'float32',
  'float64',
  'int32',
  'int64'
];
export const BUILTINS = [
  'sin',
  'cos',
  'tan',
  'exp',
  'exp2',
  'log',
  'log2',
  'sqrt',
  'rsqrt',
  'abs',
  'floor',
  'ceil',
  'round',
  'tanh',
  'sinh',
  'cosh',
  'sigmoid',
  'relu',
  'silu',
  'gelu',
  'erf',
  'pow',
  'min',
  'max',
  'clamp',
  'transpose',
  'row_max',
  'row_sum',
  'zeros',
  'ones',
  'sum',
  'dot',
  'reduce',
  'barrier',
  'compute_devices',
  'allocate',
  'memory_pool',
  'all',
  'any',
  'split',
  'reshape',
  'len',
  'print',
  'range',
  'randn',
  'rand'
];

/** Tags of ZynML's own token kinds; each derives from the tag JupyterLab's theme colours. */
export const zynTags = {
  annotation: Tag.define(tags.meta),
  magic: Tag.define(tags.meta),
  kernelType: Tag.define(tags.atom),
  type: Tag.define(tags.typeName),
  out: Tag.define()
};

/** `zyn-*` classes for ZynML's own tags (stable names for CSS and tests). */
export const zynHighlighter = tagHighlighter([
  { tag: zynTags.annotation, class: 'zyn-annotation' },
  { tag: zynTags.magic, class: 'zyn-magic' },
  { tag: zynTags.kernelType, class: 'zyn-kernel-type' },
  { tag: zynTags.type, class: 'zyn-type' },
  { tag: zynTags.out, class: 'zyn-out' }
]);

/** Colours for the tags JupyterLab's theme leaves plain (type names). */
const zynStyle = HighlightStyle.define([
  { tag: zynTags.type, color: 'var(--jp-mirror-editor-variable-2-color)' }
]);

const KEYWORD_SET = new Set(KEYWORDS);
const CONSTANT_SET = new Set(CONSTANTS);
const KERNEL_TYPE_SET = new Set(KERNEL_TYPES);
const TYPE_SET = new Set(TYPE_NAMES);
const BUILTIN_SET = new Set(BUILTINS);

/** Where a word sits, for the words whose meaning depends on it. */
type After = '' | 'kernel' | 'pipeline' | 'decl' | 'shared' | 'colon' | 'arrow';

export interface ZynState {
  /** A non-blank line has been seen (a `%%` magic counts only on the first). */
  seenCode: boolean;
  /** `%%python` cell: every line is Python. */
  pythonCell: boolean;
  /** `%python` line: the rest of this line is Python. */
  pythonLine: boolean;
  /** State of the Python mode, while it is in use. */
  py: unknown;
  /** No token on this statement line yet (`var` is a keyword only here). */
  stmtStart: boolean;
  /** The token before, where it changes the meaning of a word. */
  after: After;
  /** Open ( and [ (a `:` inside them is a slice, not a type annotation). */
  depth: number;
}

const pyParser = python as StreamParser<unknown>;

function copyPy(state: unknown): unknown {
  if (pyParser.copyState) {
    return pyParser.copyState(state);
  }
  if (state === null || typeof state !== 'object') {
    return state;
  }
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(state as Record<string, unknown>)) {
    copy[key] = Array.isArray(value)
      ? value.map(v => (v && typeof v === 'object' ? { ...v } : v))
      : value;
  }
  return copy;
}

function startPython(state: ZynState, indentUnit: number): void {
  state.py = pyParser.startState ? pyParser.startState(indentUnit) : {};
}

const NUMBER = /^(?:\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)(?:ms|us|ns|s|KiB|MiB|GiB|TiB|KB|MB|GB|TB|B)?\b/;
const OPERATOR = /^(?:\.\.\.|\.\.|\|>|->|\*\*|[-+*/%]=|==|!=|<=|>=|[-+*/%@^<>=])/;

function tokenZynML(stream: StringStream, state: ZynState): string | null {
  if (stream.sol()) {
    state.after = state.depth > 0 ? state.after : '';
    if (state.depth === 0) {
      state.stmtStart = true;
    }
    // magics: `%name` in column 1; `%%name` only on the first line of the cell
    if (stream.match(/^%%[A-Za-z_][\w.]*/)) {
      if (!state.seenCode && /^%%python$/.test(stream.current())) {
        state.pythonCell = true;
        startPython(state, stream.indentUnit);
      }
      state.seenCode = true;
      return 'meta zynMagic';
    }
    if (stream.match(/^%[A-Za-z_][\w.]*/)) {
      state.seenCode = true;
      if (stream.current() === '%python') {
        state.pythonLine = true;
        startPython(state, stream.indentUnit);
      }
      return 'meta zynMagic';
    }
  }
  if (stream.eatSpace()) {
    return null;
  }
  state.seenCode = true;
  if (stream.match('//')) {
    stream.skipToEnd();
    return 'comment';
  }
  const stmtStart = state.stmtStart;
  const after = state.after;
  state.stmtStart = false;
  state.after = '';

  // annotations: @kernel TYPE, @device("cuda:0"), ... (an `@` with a space after is matmul)
  if (stream.match(/^@[A-Za-z_]\w*/)) {
    if (stream.current() === '@kernel') {
      state.after = 'kernel';
    }
    return 'meta zynAnnotation';
  }
  if (stream.match(NUMBER)) {
    return 'number';
  }
  const quote = stream.peek();
  if (quote === '"' || quote === "'") {
    stream.next();
    let escaped = false;
    let ch: string | void;
    while ((ch = stream.next()) != null) {
      if (ch === quote && !escaped) {
        break;
      }
      escaped = !escaped && ch === '\\';
    }
    return 'string';
  }
  if (stream.match(/^[A-Za-z_]\w*/)) {
    const word = stream.current();
    if (after === 'kernel') {
      return KERNEL_TYPE_SET.has(word) ? 'atom zynKernelType' : 'variableName';
    }
    if (after === 'pipeline') {
      return 'variableName.definition';
    }
    if (word === 'var') {
      // `var` declares only where a statement (or `shared`) starts; elsewhere it is a name
      if (stmtStart || after === 'shared') {
        state.after = 'decl';
        return 'keyword';
      }
      return after === 'decl' ? 'variableName.definition' : 'variableName';
    }
    if (after === 'decl') {
      return 'variableName.definition';
    }
    if (CONSTANT_SET.has(word)) {
      return 'atom';
    }
    if (KEYWORD_SET.has(word)) {
      if (word === 'pipeline') {
        state.after = 'pipeline';
      } else if (word === 'let') {
        state.after = 'decl';
      } else if (word === 'shared') {
        state.after = 'shared';
      }
      return 'keyword';
    }
    if ((after === 'colon' || after === 'arrow') && TYPE_SET.has(word)) {
      return 'typeName zynType';
    }
    if (word === 'out') {
      return 'variableName.special zynOut';
    }
    if (BUILTIN_SET.has(word) && stream.match(/^\s*\(/, false)) {
      return 'variableName.standard';
    }
    return 'variableName';
  }
  if (stream.match(OPERATOR)) {
    if (stream.current() === '->') {
      state.after = 'arrow';
    }
    return 'operator';
  }
  const ch = stream.next();
  if (ch === '(' || ch === '[' || ch === '{') {
    if (ch !== '{') {
      state.depth++;
    }
    return 'bracket';
  }
  if (ch === ')' || ch === ']' || ch === '}') {
    if (ch !== '}') {
      state.depth = Math.max(0, state.depth - 1);
    }
    return 'bracket';
  }
  if (ch === ':') {
    // `name: f32` in a parameter list or after `let x`; a slice inside [ ] otherwise
    state.after = 'colon';
    return 'punctuation';
  }
  if (ch === ',' || ch === '.') {
    return 'punctuation';
  }
  return null;
}

export const zynmlParser: StreamParser<ZynState> = {
  name: 'zynml',
  startState: () => ({
    seenCode: false,
    pythonCell: false,
    pythonLine: false,
    py: null,
    stmtStart: true,
    after: '',
    depth: 0
  }),
  copyState: state => ({ ...state, py: state.py ? copyPy(state.py) : null }),
  token(stream, state) {
    if (stream.sol() && state.pythonLine) {
      state.pythonLine = false;
      state.py = null;
    }
    if (state.pythonCell || state.pythonLine) {
      return pyParser.token(stream, state.py);
    }
    return tokenZynML(stream, state);
  },
  blankLine(state, indentUnit) {
    if (state.pythonLine) {
      state.pythonLine = false;
      state.py = null;
    }
    if (state.pythonCell && pyParser.blankLine) {
      pyParser.blankLine(state.py, indentUnit);
    }
  },
  indent(state, textAfter, context) {
    if (state.pythonCell && pyParser.indent) {
      return pyParser.indent(state.py, textAfter, context);
    }
    return null;
  },
  languageData: {
    commentTokens: { line: '//' },
    closeBrackets: { brackets: ['(', '[', '{', '"', "'"] },
    indentOnInput: /^\s*[}\])]$/
  },
  tokenTable: {
    zynAnnotation: zynTags.annotation,
    zynMagic: zynTags.magic,
    zynKernelType: zynTags.kernelType,
    zynType: zynTags.type,
    zynOut: zynTags.out
  }
};

export const zynmlLanguage = StreamLanguage.define(zynmlParser);

let support: LanguageSupport | null = null;

/** The language with its highlighters: `tok-*` and `zyn-*` classes besides the theme's. */
export function zynml(): LanguageSupport {
  if (!support) {
    support = new LanguageSupport(zynmlLanguage, [
      syntaxHighlighting(classHighlighter),
      syntaxHighlighting(zynHighlighter),
      syntaxHighlighting(zynStyle)
    ]);
  }
  return support;
}
