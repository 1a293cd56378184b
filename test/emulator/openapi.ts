/**
 * Runpod's OpenAPI document (with the live-API extensions of ./extensions.ts) as an executable
 * contract: find the operation for a method and path, and validate query strings, request bodies
 * and responses with ajv in the JSON Schema 2020-12 dialect (the dialect OpenAPI 3.1 uses).
 *
 * The emulator validates every request it receives with this, and (self-check) every response it
 * sends; the tests validate every request they send and every response they read with it too. A
 * violation is a list of messages in Runpod's own style (`$.gpu.count: must be >= 1`).
 */
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyLiveApiExtensions, type Json, type JsonObject } from './extensions';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
const METHODS: readonly HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** The document this contract was built from (a verbatim copy of Runpod's own OpenAPI document for API v2). */
export const OPENAPI_PATH = join(__dirname, 'openapi-v2.json');

export interface OperationMatch {
  /** Path template, e.g. `/v2/pods/{id}`. */
  template: string;
  method: HttpMethod;
  operationId: string;
  pathParams: Record<string, string>;
}

export type MatchResult =
  | ({ kind: 'operation' } & OperationMatch)
  | { kind: 'no-path' }
  | { kind: 'method-not-allowed'; allow: HttpMethod[] };

interface Parameter {
  name: string;
  in: string;
  required: boolean;
  schema: JsonObject;
  style?: string;
  explode?: boolean;
}

interface Operation {
  id: string;
  template: string;
  method: HttpMethod;
  parameters: Parameter[];
  requestSchema?: JsonObject;
  requestRequired: boolean;
  responses: Record<string, JsonObject>;
}

export interface ResponseToCheck {
  status: number;
  /** The `content-type` header as sent (parameters such as charset are ignored). */
  contentType?: string | null;
  /** The `retry-after` header as sent. */
  retryAfter?: string | null;
  /** The parsed JSON body, or undefined when the response had no body. */
  body: unknown;
}

/** Thrown by the `assert*` helpers: the exchange broke the document. */
export class ContractViolation extends Error {
  constructor(
    readonly where: string,
    readonly violations: string[],
  ) {
    super(`${where} violates openapi-v2.json:\n  ${violations.join('\n  ')}`);
    this.name = 'ContractViolation';
  }
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `$ref: '#/components/…'` becomes an absolute ref into the schema registered as `openapi`. */
function absolutizeRefs(value: Json): Json {
  if (Array.isArray(value)) return value.map(absolutizeRefs);
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const [key, inner] of Object.entries(value)) {
    out[key] =
      key === '$ref' && typeof inner === 'string' && inner.startsWith('#/')
        ? `openapi${inner}`
        : absolutizeRefs(inner);
  }
  return out;
}

function jsonPointerGet(doc: JsonObject, ref: string): JsonObject {
  if (!ref.startsWith('#/')) throw new Error(`unsupported $ref ${ref}`);
  let node: Json = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    node = isObject(node) ? (node[key] ?? null) : null;
  }
  if (!isObject(node)) throw new Error(`dangling $ref ${ref}`);
  return node;
}

/** One error of ajv in Runpod's style: `$.gpu.count: must be >= 1`. */
function formatError(error: ErrorObject, root: string): string | undefined {
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const path = root + segments.map((s) => (/^\d+$/.test(s) ? `[${s}]` : `.${s}`)).join('');
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'if':
      return undefined; // the failing `then` reports the real problem
    case 'unevaluatedProperties':
      return `${path}: additional properties '${String(params.unevaluatedProperty)}' not allowed`;
    case 'additionalProperties':
      return `${path}: additional properties '${String(params.additionalProperty)}' not allowed`;
    case 'required':
      return `${path}: missing property '${String(params.missingProperty)}'`;
    case 'enum':
      return `${path}: must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return `${path}: ${error.message ?? error.keyword}`;
  }
}

export function formatErrors(errors: ErrorObject[] | null | undefined, root = '$'): string[] {
  const out: string[] = [];
  for (const error of errors ?? []) {
    const line = formatError(error, root);
    if (line !== undefined && !out.includes(line)) out.push(line);
  }
  return out;
}

export class OpenApiContract {
  private static cached: OpenApiContract | undefined;

  /** The contract of the patched document, built once per process. */
  static load(): OpenApiContract {
    OpenApiContract.cached ??= new OpenApiContract(
      applyLiveApiExtensions(JSON.parse(readFileSync(OPENAPI_PATH, 'utf8')) as JsonObject),
    );
    return OpenApiContract.cached;
  }

  private readonly ajv: Ajv2020;
  private readonly operations: Operation[] = [];
  private readonly byId = new Map<string, Operation>();
  private readonly validators = new WeakMap<object, ValidateFunction>();
  private readonly named = new Map<string, JsonObject>();

  constructor(readonly document: JsonObject) {
    this.ajv = new Ajv2020({
      allErrors: true,
      // Schema typos fail loudly; the document's own style (keywords without `type`, `required`
      // naming properties declared in an `allOf` sibling) is legal JSON Schema and accepted.
      strictSchema: true,
      strictNumbers: true,
      strictTypes: false,
      strictTuples: false,
      strictRequired: false,
      allowUnionTypes: true,
    });
    addFormats(this.ajv);
    // OpenAPI's numeric formats carry no constraint JSON Schema can check.
    for (const format of ['float', 'double', 'int32', 'int64']) this.ajv.addFormat(format, true);
    // Annotations of OpenAPI and of Runpod's generator.
    this.ajv.addVocabulary(['x-enum-varnames', 'example', 'discriminator', 'components']);
    const components = absolutizeRefs(document.components ?? {}) as JsonObject;
    this.ajv.addSchema({ $id: 'openapi', components }, 'openapi');
    this.indexOperations();
  }

  private indexOperations(): void {
    const paths = this.document.paths;
    if (!isObject(paths)) throw new Error('openapi document has no paths');
    for (const [template, rawItem] of Object.entries(paths)) {
      if (!isObject(rawItem)) continue;
      const shared = Array.isArray(rawItem.parameters) ? rawItem.parameters : [];
      for (const method of METHODS) {
        const raw = rawItem[method.toLowerCase()];
        if (!isObject(raw)) continue;
        const own = Array.isArray(raw.parameters) ? raw.parameters : [];
        const parameters = [...shared, ...own].map((p) => this.resolveParameter(p));
        const body = isObject(raw.requestBody) ? this.resolve(raw.requestBody) : undefined;
        const bodyContent = body && isObject(body.content) ? body.content : undefined;
        const jsonBody = bodyContent?.['application/json'];
        const responses: Record<string, JsonObject> = {};
        for (const [status, response] of Object.entries(
          isObject(raw.responses) ? raw.responses : {},
        )) {
          if (isObject(response)) responses[status] = this.resolve(response);
        }
        const op: Operation = {
          id: String(raw.operationId),
          template,
          method,
          parameters,
          requestSchema:
            isObject(jsonBody) && isObject(jsonBody.schema) ? jsonBody.schema : undefined,
          requestRequired: body?.required === true,
          responses,
        };
        this.operations.push(op);
        this.byId.set(op.id, op);
      }
    }
  }

  private resolve(node: JsonObject): JsonObject {
    let current = node;
    for (let i = 0; i < 10 && typeof current.$ref === 'string'; i++) {
      current = jsonPointerGet(this.document, current.$ref);
    }
    return current;
  }

  private resolveParameter(raw: Json): Parameter {
    if (!isObject(raw)) throw new Error('malformed parameter in openapi document');
    const p = this.resolve(raw);
    return {
      name: String(p.name),
      in: String(p.in),
      required: p.required === true,
      schema: isObject(p.schema) ? p.schema : {},
      style: typeof p.style === 'string' ? p.style : undefined,
      explode: typeof p.explode === 'boolean' ? p.explode : undefined,
    };
  }

  private validator(schema: JsonObject): ValidateFunction {
    let fn = this.validators.get(schema);
    if (!fn) {
      fn = this.ajv.compile(absolutizeRefs(schema) as JsonObject);
      this.validators.set(schema, fn);
    }
    return fn;
  }

  private validate(schema: JsonObject, value: unknown, root = '$'): string[] {
    const fn = this.validator(schema);
    return fn(value) ? [] : formatErrors(fn.errors, root);
  }

  /** Validates a value against `#/components/schemas/<name>`. */
  validateSchema(name: string, value: unknown): string[] {
    let schema = this.named.get(name);
    if (!schema) {
      schema = { $ref: `#/components/schemas/${name}` };
      this.named.set(name, schema);
    }
    return this.validate(schema, value);
  }

  /** The operation serving `method` on `pathname` (a literal segment beats a `{param}`). */
  match(method: string, pathname: string): MatchResult {
    const segments = pathname.split('/');
    let best: { op: Operation; params: Record<string, string>; score: number }[] = [];
    for (const op of this.operations) {
      const parts = op.template.split('/');
      if (parts.length !== segments.length) continue;
      const params: Record<string, string> = {};
      let score = 0;
      let ok = true;
      for (let i = 0; i < parts.length && ok; i++) {
        const part = parts[i] ?? '';
        const segment = segments[i] ?? '';
        if (part.startsWith('{') && part.endsWith('}')) {
          if (segment === '') ok = false;
          else {
            try {
              params[part.slice(1, -1)] = decodeURIComponent(segment);
            } catch {
              ok = false; // a malformed %-escape names nothing
            }
          }
        } else if (part === segment) {
          score++;
        } else {
          ok = false;
        }
      }
      if (!ok) continue;
      const top = best[0]?.score ?? -1;
      if (score > top) best = [{ op, params, score }];
      else if (score === top) best.push({ op, params, score });
    }
    if (best.length === 0) return { kind: 'no-path' };
    const hit = best.find((b) => b.op.method === method);
    if (!hit) return { kind: 'method-not-allowed', allow: best.map((b) => b.op.method) };
    return {
      kind: 'operation',
      template: hit.op.template,
      method: hit.op.method,
      operationId: hit.op.id,
      pathParams: hit.params,
    };
  }

  private operation(method: string, pathname: string): Operation {
    const m = this.match(method.toUpperCase(), pathname);
    if (m.kind !== 'operation') {
      throw new ContractViolation(`${method} ${pathname}`, ['no such operation in the document']);
    }
    const op = this.byId.get(m.operationId);
    if (!op) throw new Error(`operation ${m.operationId} vanished`);
    return op;
  }

  /** Whether the operation declares a request body. */
  hasRequestBody(operationId: string): { declared: boolean; required: boolean } {
    const op = this.byId.get(operationId);
    return { declared: op?.requestSchema !== undefined, required: op?.requestRequired ?? false };
  }

  /**
   * Parses and validates a query string against the operation's query parameters: arrays are
   * comma-separated (`style: form, explode: false`), integers and booleans are coerced, an
   * unknown or repeated parameter is a violation.
   */
  validateQuery(
    operationId: string,
    query: URLSearchParams,
  ): { values: Record<string, unknown>; errors: string[] } {
    const op = this.byId.get(operationId);
    if (!op) throw new Error(`unknown operation ${operationId}`);
    const declared = new Map(op.parameters.filter((p) => p.in === 'query').map((p) => [p.name, p]));
    const values: Record<string, unknown> = {};
    const errors: string[] = [];
    const seen = new Set<string>();
    for (const [name, raw] of query) {
      const p = declared.get(name);
      if (!p) {
        errors.push(`query.${name}: unknown query parameter`);
        continue;
      }
      if (seen.has(name)) {
        errors.push(`query.${name}: given more than once`);
        continue;
      }
      seen.add(name);
      values[name] = this.coerce(p.schema, raw);
    }
    for (const p of declared.values()) {
      if (p.required && !seen.has(p.name)) errors.push(`query.${p.name}: required`);
    }
    for (const [name, value] of Object.entries(values)) {
      const p = declared.get(name);
      if (p) errors.push(...this.validate(p.schema, value, `query.${name}`));
    }
    return { values, errors };
  }

  private coerce(schema: JsonObject, raw: string): unknown {
    const resolved = this.resolve(schema);
    const type = resolved.type;
    if (type === 'array') {
      const items = isObject(resolved.items) ? this.resolve(resolved.items) : {};
      return raw.split(',').map((part) => this.coerce(items, part));
    }
    if (type === 'integer' || type === 'number') {
      return /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw;
    }
    if (type === 'boolean') return raw === 'true' ? true : raw === 'false' ? false : raw;
    return raw;
  }

  /** Violations of a JSON request body (undefined: no body was sent). */
  validateRequestBody(method: string, pathname: string, body: unknown): string[] {
    const op = this.operation(method, pathname);
    return this.validateBodyOf(op, body);
  }

  validateRequestBodyOf(operationId: string, body: unknown): string[] {
    const op = this.byId.get(operationId);
    if (!op) throw new Error(`unknown operation ${operationId}`);
    return this.validateBodyOf(op, body);
  }

  private validateBodyOf(op: Operation, body: unknown): string[] {
    if (!op.requestSchema) {
      return body === undefined ? [] : [`$: ${op.id} takes no request body`];
    }
    if (body === undefined) return op.requestRequired ? ['$: request body is required'] : [];
    return this.validate(op.requestSchema, body);
  }

  /**
   * Violations of a response: the status must be documented for the operation (or fall to its
   * `default`), the content type must be the documented one, the body must match its schema, a
   * body-less response must have no body, and a 429 must carry an integer `Retry-After`.
   */
  validateResponse(method: string, pathname: string, response: ResponseToCheck): string[] {
    const op = this.operation(method, pathname);
    return this.validateResponseOf(op.id, response);
  }

  validateResponseOf(operationId: string, response: ResponseToCheck): string[] {
    const op = this.byId.get(operationId);
    if (!op) throw new Error(`unknown operation ${operationId}`);
    const documented = op.responses[String(response.status)];
    const spec = documented ?? op.responses.default;
    if (!spec) return [`status ${response.status} is not documented for ${op.id}`];
    const content = isObject(spec.content) ? spec.content : undefined;
    if (!content) {
      return response.body === undefined
        ? []
        : [`status ${response.status} of ${op.id} has no body in the document, but one was sent`];
    }
    const type = (response.contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    const media = content[type];
    if (!isObject(media)) {
      return [
        `content-type '${type}' is not documented for ${op.id} ${response.status} (expected ${Object.keys(content).join(' or ')})`,
      ];
    }
    const errors: string[] = [];
    if (response.body === undefined)
      errors.push(`status ${response.status} of ${op.id} needs a body`);
    else if (isObject(media.schema)) errors.push(...this.validate(media.schema, response.body));
    if (response.status === 429) {
      if (!/^\d+$/.test(response.retryAfter ?? '')) {
        errors.push('429 without an integer Retry-After header (seconds)');
      }
    }
    return errors;
  }

  assertRequestBody(method: string, pathname: string, body: unknown): void {
    const errors = this.validateRequestBody(method, pathname, body);
    if (errors.length > 0) throw new ContractViolation(`request ${method} ${pathname}`, errors);
  }

  assertResponse(method: string, pathname: string, response: ResponseToCheck): void {
    const errors = this.validateResponse(method, pathname, response);
    if (errors.length > 0) {
      throw new ContractViolation(`response ${response.status} to ${method} ${pathname}`, errors);
    }
  }
}
