/**
 * Where each error class of src/ gets its hint (the next action), read from the sources with
 * TypeScript's parser: a class whose hint comes from its callers must be given one at every
 * `new`, and a class that gives it itself (a default, a table by kind) must give a real one.
 */
import ts from 'typescript';

export interface Source {
  file: string;
  text: string;
}

interface ErrorClass {
  name: string;
  file: string;
  parent: string;
  ctor: ts.ConstructorDeclaration | undefined;
  line: number;
}

/** Where a class's hint comes from. */
type HintSource =
  /** The class gives it (a default, a constant, a table by kind): callers may leave it out. */
  | { kind: 'own' }
  /** The constructor's argument at `index`: every caller must give one. */
  | { kind: 'argument'; index: number }
  /** Nowhere: the class can be built without a next action. */
  | { kind: 'none'; why: string };

/** `null`, `undefined`, `void 0` or an empty string: no hint. */
function noHint(node: ts.Expression): boolean {
  if (node.kind === ts.SyntaxKind.NullKeyword) return true;
  if (ts.isIdentifier(node) && node.text === 'undefined') return true;
  if (ts.isVoidExpression(node)) return true;
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node))
    return node.text.trim() === '';
  return false;
}

function superCall(ctor: ts.ConstructorDeclaration): ts.CallExpression | undefined {
  for (const statement of ctor.body?.statements ?? []) {
    if (!ts.isExpressionStatement(statement)) continue;
    const call = statement.expression;
    if (ts.isCallExpression(call) && call.expression.kind === ts.SyntaxKind.SuperKeyword)
      return call;
  }
  return undefined;
}

/** A parameter whose type lets a caller pass no hint (`?`, `| null`, `| undefined`). */
function mayBeLeftOut(param: ts.ParameterDeclaration): boolean {
  if (param.questionToken !== undefined) return true;
  const type = param.type;
  if (type === undefined) return false;
  const parts = ts.isUnionTypeNode(type) ? type.types : [type];
  return parts.some(
    (t) =>
      (ts.isLiteralTypeNode(t) && t.literal.kind === ts.SyntaxKind.NullKeyword) ||
      t.kind === ts.SyntaxKind.UndefinedKeyword,
  );
}

/**
 * What is wrong with the hints of the HintedError subclasses in `sources`: a class declared so
 * that it can be built without a hint (it passes none to its parent, or takes an optional or
 * nullable one without a default), and every `new` of a class whose hint comes from its callers
 * that gives none. Each line names the file and line.
 */
export function missingHints(sources: readonly Source[]): {
  classes: string[];
  problems: string[];
} {
  const classes = new Map<string, ErrorClass>();
  const parsed = sources.map((s) => ({
    ...s,
    sf: ts.createSourceFile(s.file, s.text, ts.ScriptTarget.Latest, true),
  }));
  const at = (sf: ts.SourceFile, node: ts.Node): number =>
    sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
  for (const { file, sf } of parsed) {
    const visit = (node: ts.Node): void => {
      if (ts.isClassDeclaration(node) && node.name !== undefined) {
        const extendsClause = node.heritageClauses?.find(
          (h) => h.token === ts.SyntaxKind.ExtendsKeyword,
        );
        const parent = extendsClause?.types[0]?.expression;
        if (parent !== undefined && ts.isIdentifier(parent)) {
          classes.set(node.name.text, {
            name: node.name.text,
            file,
            parent: parent.text,
            ctor: node.members.find(ts.isConstructorDeclaration),
            line: at(sf, node),
          });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  const isHinted = (name: string): boolean => {
    for (let c = classes.get(name); c !== undefined; c = classes.get(c.parent)) {
      if (c.parent === 'HintedError') return true;
    }
    return false;
  };
  const memo = new Map<string, HintSource>();
  const hintSource = (name: string): HintSource => {
    if (name === 'HintedError') return { kind: 'argument', index: 2 };
    const known = memo.get(name);
    if (known !== undefined) return known;
    const cls = classes.get(name)!;
    let found: HintSource;
    const parent = hintSource(cls.parent);
    if (cls.ctor === undefined || parent.kind !== 'argument') {
      found = parent;
    } else {
      const call = superCall(cls.ctor);
      const arg = call?.arguments[parent.index];
      if (arg === undefined || noHint(arg)) {
        found = { kind: 'none', why: `passes no hint to ${cls.parent}` };
      } else {
        const param = ts.isIdentifier(arg)
          ? cls.ctor.parameters.find((p) => ts.isIdentifier(p.name) && p.name.text === arg.text)
          : undefined;
        if (param === undefined) found = { kind: 'own' };
        else if (param.initializer !== undefined)
          found = noHint(param.initializer)
            ? { kind: 'none', why: `its hint defaults to ${param.initializer.getText()}` }
            : { kind: 'own' };
        else if (mayBeLeftOut(param))
          found = { kind: 'none', why: 'its hint may be left out, with no default' };
        else found = { kind: 'argument', index: cls.ctor.parameters.indexOf(param) };
      }
    }
    memo.set(name, found);
    return found;
  };
  const hinted = [...classes.keys()].filter(isHinted).sort();
  const problems: string[] = [];
  for (const name of hinted) {
    const source = hintSource(name);
    const cls = classes.get(name)!;
    if (source.kind === 'none') problems.push(`${cls.file}:${cls.line}: ${name} ${source.why}`);
  }
  for (const { file, sf } of parsed) {
    const visit = (node: ts.Node): void => {
      if (ts.isNewExpression(node) && ts.isIdentifier(node.expression)) {
        const name = node.expression.text;
        const source = isHinted(name) ? hintSource(name) : null;
        if (source?.kind === 'argument') {
          const arg = node.arguments?.[source.index];
          if (arg === undefined || noHint(arg))
            problems.push(`${file}:${at(sf, node)}: new ${name}(…) without a hint`);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return { classes: hinted, problems };
}
