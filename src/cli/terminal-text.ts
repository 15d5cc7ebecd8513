/**
 * Text as a terminal shows it. Control characters are made visible, so that
 * text from a worker cannot move the cursor, ring the bell or start an escape
 * sequence; and width is counted in terminal columns, not code points, so that
 * a line cut to the screen's width stays on one row. Pure, no dependencies.
 *
 * Widths follow the usual wcwidth rules: East Asian Wide and Fullwidth
 * characters and emoji take two columns, combining marks and format
 * characters none, everything else one. Where terminals disagree (emoji
 * sequences, text symbols with an emoji selector) the count errs wide: a line
 * a column short of the screen is harmless, a line a column too long wraps.
 */

/** Unicode's Control Pictures block has one for each C0 control (U+2400 + code) and DEL. */
const CONTROL_PICTURES = 0x2400;
const DEL_PICTURE = '\u2421';
const REPLACEMENT = '\ufffd';

function isControl(code: number): boolean {
  return code < 0x20 || (code >= 0x7f && code <= 0x9f);
}

/**
 * `text` with each C0 control, DEL and C1 control replaced by a visible stand-in:
 * the Control Pictures symbol (ESC becomes ␛, BEL ␇, LF ␊, DEL ␡) or, for C1
 * controls, which have none, U+FFFD.
 */
export function printable(text: string): string {
  let out: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (!isControl(code)) {
      if (out !== undefined) out += text[i];
      continue;
    }
    out ??= text.slice(0, i);
    out +=
      code < 0x20
        ? String.fromCharCode(CONTROL_PICTURES + code)
        : code === 0x7f
          ? DEL_PICTURE
          : REPLACEMENT;
  }
  return out ?? text;
}

/** Code point ranges (inclusive) of East Asian Wide and Fullwidth text, with emoji blocks. */
const WIDE: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x115f], // Hangul Jamo initial consonants
  [0x2329, 0x232a], // angle brackets
  [0x2e80, 0x303e], // CJK radicals, Kangxi, CJK symbols and punctuation (ideographic space)
  [0x3041, 0x33ff], // kana, Bopomofo, Hangul compatibility Jamo, enclosed CJK, CJK compatibility
  [0x3400, 0x4dbf], // CJK extension A
  [0x4e00, 0x9fff], // CJK unified ideographs
  [0xa000, 0xa4cf], // Yi
  [0xa960, 0xa97f], // Hangul Jamo extended A
  [0xac00, 0xd7a3], // Hangul syllables
  [0xf900, 0xfaff], // CJK compatibility ideographs
  [0xfe10, 0xfe19], // vertical forms
  [0xfe30, 0xfe6f], // CJK compatibility forms, small form variants
  [0xff00, 0xff60], // fullwidth forms
  [0xffe0, 0xffe6], // fullwidth signs
  [0x16fe0, 0x16fe4], // ideographic symbols
  [0x17000, 0x18cff], // Tangut, Khitan
  [0x1b000, 0x1b2ff], // kana supplement and extensions, Nushu
  [0x1f200, 0x1f2ff], // enclosed ideographic supplement
  [0x1f300, 0x1f64f], // pictographs, emoticons
  [0x1f680, 0x1f6ff], // transport and map symbols
  [0x1f900, 0x1f9ff], // supplemental symbols and pictographs
  [0x1fa70, 0x1faff], // symbols and pictographs extended A
  [0x20000, 0x2fffd], // CJK extensions B to F, compatibility supplement
  [0x30000, 0x3fffd], // CJK extensions G and H
];

const ZERO_WIDTH = /^[\p{Mn}\p{Me}\p{Cf}]$/u;
const EMOJI_PRESENTATION = /^\p{Emoji_Presentation}$/u;
const EMOJI_SELECTOR = '\ufe0f';

/** Columns one code point takes: 0, 1 or 2. Controls count 0 (print them through `printable`). */
export function codePointWidth(codePoint: number): 0 | 1 | 2 {
  if (isControl(codePoint)) return 0;
  if (codePoint < 0x300) return 1; // Latin, fast path
  const char = String.fromCodePoint(codePoint);
  if (ZERO_WIDTH.test(char) || (codePoint >= 0x1160 && codePoint <= 0x11ff)) return 0;
  if (EMOJI_PRESENTATION.test(char)) return 2;
  for (const [low, high] of WIDE) {
    if (codePoint < low) break;
    if (codePoint <= high) return 2;
  }
  return 1;
}

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** Columns one grapheme cluster takes. */
function clusterWidth(cluster: string): number {
  let width = 0;
  for (const char of cluster) width += codePointWidth(char.codePointAt(0) ?? 0);
  // A text symbol followed by the emoji selector (❤️) is drawn as an emoji by most terminals.
  return width < 2 && cluster.includes(EMOJI_SELECTOR) ? 2 : width;
}

/** Columns `text` takes on a terminal. */
export function displayWidth(text: string): number {
  let width = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x20 && code < 0x7f) {
      width++; // ASCII, fast path
      continue;
    }
    // Measure the rest by grapheme cluster, so that combining sequences count once.
    for (const { segment } of graphemes.segment(text.slice(i))) width += clusterWidth(segment);
    return width;
  }
  return width;
}

/** `text` cut to at most `columns` columns, ending in … when cut; never splits a grapheme. */
export function clip(text: string, columns: number): string {
  if (displayWidth(text) <= columns) return text;
  const room = Math.max(0, columns - 1);
  let width = 0;
  let kept = '';
  for (const { segment } of graphemes.segment(text)) {
    const next = clusterWidth(segment);
    if (width + next > room) break;
    width += next;
    kept += segment;
  }
  return columns > 0 ? `${kept}…` : '';
}

/** `text` followed by spaces up to `columns` columns. */
export function padEnd(text: string, columns: number): string {
  return text + ' '.repeat(Math.max(0, columns - displayWidth(text)));
}
