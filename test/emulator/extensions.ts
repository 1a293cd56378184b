/**
 * THE ONE PLACE where the emulator departs from the stored OpenAPI document.
 *
 * `openapi-v2.json` (a verbatim copy of Runpod's own OpenAPI document, "Frontdoor v2.9.0",
 * August 2026) is the authority for every shape and status code. The live API has moved on since
 * (Runpod's changelog: pod `cmd`, account secrets, paged pod lists), and the project depends on
 * three of those newer parts. Each is declared below as a patch to the document, so the emulator's
 * own request validation and the tests' request/response validation read ONE contract: nothing
 * outside this file may accept or return anything the patched document does not describe.
 *
 * 1. `POST /v2/pods` takes `cmd`: an array of strings, the pod's command run after the image's
 *    entrypoint (for example `["bash", "-c", "<bootstrap>"]`). Send `cmd`, not the older `args`.
 * 2. Account secrets under `/v2/account/secrets` (list with `?name=`, create, update, delete),
 *    referenced from a pod's env as `{{ RUNPOD_SECRET_<name> }}` and resolved when the pod starts.
 *    Their shapes are not published in the document; the ones here are the emulator's reading of
 *    the live API: a secret's value is write-only (never returned).
 * 3. `GET /v2/pods` pagination: `limit` and `cursor` query parameters and a `pagination` object
 *    (`{hasNextPage, nextCursor}`) beside `pods`. The document's `ListPodsResponse` has only
 *    `pods` and allows extra properties, so a client that follows the document (no `limit`) still
 *    gets every pod in one answer and can ignore `pagination`.
 *
 * If the document itself changes where a patch applies, `applyLiveApiExtensions` throws instead
 * of silently patching the wrong thing.
 */

/** A JSON value as parsed from the document. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** Extension 1: the schema of `cmd` on `POST /v2/pods`. */
export const CMD_SCHEMA: JsonObject = {
  type: 'array',
  minItems: 1,
  items: { type: 'string' },
  description:
    'LIVE API EXTENSION (not in the stored document): the pod command, run after the image entrypoint, as an argv array.',
};

/** Extension 2: secret names usable in `{{ RUNPOD_SECRET_<name> }}`. */
export const SECRET_NAME_PATTERN = '^[A-Za-z0-9_.-]{1,128}$';

/** Extension 3: the most pods one `GET /v2/pods` page may hold. */
export const MAX_PODS_PAGE_LIMIT = 1000;

function problemResponses(): JsonObject {
  return {
    '401': { $ref: '#/components/responses/UnauthorizedError' },
    '403': { $ref: '#/components/responses/ForbiddenError' },
    '429': { $ref: '#/components/responses/TooManyRequestsError' },
    default: {
      description: 'Error',
      content: {
        'application/problem+json': { schema: { $ref: '#/components/schemas/ErrorResponse' } },
      },
    },
  };
}

function jsonContent(ref: string): JsonObject {
  return { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } };
}

function child(parent: Json | undefined, key: string | number, where: string): JsonObject {
  const value =
    typeof key === 'number'
      ? Array.isArray(parent)
        ? parent[key]
        : undefined
      : parent && typeof parent === 'object' && !Array.isArray(parent)
        ? parent[key]
        : undefined;
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error(
      `openapi-v2.json changed: ${where} is missing; review test/emulator/extensions.ts`,
    );
  }
  return value;
}

/** Returns a deep copy of `doc` with the live-API extensions above applied. */
export function applyLiveApiExtensions(doc: JsonObject): JsonObject {
  const out = structuredClone(doc);
  const components = child(out, 'components', 'components');
  const schemas = child(components, 'schemas', 'components.schemas');
  const paths = child(out, 'paths', 'paths');

  // 1. `cmd` on POST /v2/pods. CreatePodRequest is `allOf[ContainerConfig, {pod fields}]` with
  //    `unevaluatedProperties: false` at the top, so a property added to the second member is
  //    "evaluated" and accepted, while every other unknown field still answers 422.
  const createPod = child(schemas, 'CreatePodRequest', 'CreatePodRequest');
  const podFields = child(createPod.allOf, 1, 'CreatePodRequest.allOf[1]');
  const podProps = child(podFields, 'properties', 'CreatePodRequest.allOf[1].properties');
  if (!('name' in podProps) || 'cmd' in podProps) {
    throw new Error('openapi-v2.json changed around CreatePodRequest; review extensions.ts');
  }
  podProps.cmd = CMD_SCHEMA;

  // 2. Account secrets.
  schemas.Secret = {
    type: 'object',
    additionalProperties: false,
    required: ['id', 'name', 'description', 'createdAt', 'updatedAt'],
    description: 'LIVE API EXTENSION: an account secret. Its value is write-only.',
    properties: {
      id: { type: 'string' },
      name: { type: 'string', pattern: SECRET_NAME_PATTERN },
      description: { type: ['string', 'null'] },
      createdAt: { type: 'string', format: 'date-time' },
      updatedAt: { type: 'string', format: 'date-time' },
    },
  };
  schemas.CreateSecretRequest = {
    type: 'object',
    additionalProperties: false,
    required: ['name', 'value'],
    properties: {
      name: { type: 'string', pattern: SECRET_NAME_PATTERN },
      value: { type: 'string', minLength: 1 },
      description: { type: 'string' },
    },
  };
  schemas.UpdateSecretRequest = {
    type: 'object',
    additionalProperties: false,
    minProperties: 1,
    properties: {
      value: { type: 'string', minLength: 1 },
      description: { type: 'string' },
    },
  };
  schemas.ListSecretsResponse = {
    type: 'object',
    required: ['secrets'],
    properties: { secrets: { type: 'array', items: { $ref: '#/components/schemas/Secret' } } },
  };
  if ('/v2/account/secrets' in paths) {
    throw new Error('openapi-v2.json now documents /v2/account/secrets; drop the extension');
  }
  paths['/v2/account/secrets'] = {
    get: {
      operationId: 'listSecrets',
      summary: 'LIVE API EXTENSION: list account secrets (values are never returned)',
      parameters: [
        {
          name: 'name',
          in: 'query',
          required: false,
          description: 'Only the secret with exactly this name.',
          schema: { type: 'string' },
        },
      ],
      responses: {
        '200': { description: 'OK', content: jsonContent('ListSecretsResponse') },
        ...problemResponses(),
      },
    },
    post: {
      operationId: 'createSecret',
      summary: 'LIVE API EXTENSION: create an account secret',
      requestBody: { required: true, content: jsonContent('CreateSecretRequest') },
      responses: {
        '201': { description: 'Created', content: jsonContent('Secret') },
        '409': {
          description: 'A secret with this name exists',
          content: {
            'application/problem+json': {
              schema: { $ref: '#/components/schemas/ErrorResponse' },
            },
          },
        },
        '422': { $ref: '#/components/responses/UnprocessableEntityError' },
        ...problemResponses(),
      },
    },
  };
  paths['/v2/account/secrets/{id}'] = {
    parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
    patch: {
      operationId: 'updateSecret',
      summary: 'LIVE API EXTENSION: change a secret value or description',
      requestBody: { required: true, content: jsonContent('UpdateSecretRequest') },
      responses: {
        '200': { description: 'OK', content: jsonContent('Secret') },
        '404': { $ref: '#/components/responses/NotFoundError' },
        '422': { $ref: '#/components/responses/UnprocessableEntityError' },
        ...problemResponses(),
      },
    },
    delete: {
      operationId: 'deleteSecret',
      summary: 'LIVE API EXTENSION: delete an account secret',
      responses: {
        '204': { description: 'Deleted. Response has no body.' },
        '404': { $ref: '#/components/responses/NotFoundError' },
        ...problemResponses(),
      },
    },
  };

  // 3. Pagination of GET /v2/pods.
  const listPods = child(child(paths, '/v2/pods', 'paths./v2/pods'), 'get', 'GET /v2/pods');
  const params = listPods.parameters;
  if (!Array.isArray(params)) throw new Error('openapi-v2.json changed: GET /v2/pods parameters');
  params.push(
    {
      name: 'limit',
      in: 'query',
      required: false,
      description: `LIVE API EXTENSION: page size (at most ${MAX_PODS_PAGE_LIMIT}). Without it every pod is returned.`,
      schema: { type: 'integer', minimum: 1, maximum: MAX_PODS_PAGE_LIMIT },
    },
    {
      name: 'cursor',
      in: 'query',
      required: false,
      description: 'LIVE API EXTENSION: `pagination.nextCursor` of the previous page.',
      schema: { type: 'string', minLength: 1 },
    },
  );
  const listPodsProps = child(
    child(schemas, 'ListPodsResponse', 'ListPodsResponse'),
    'properties',
    'ListPodsResponse.properties',
  );
  listPodsProps.pagination = {
    type: 'object',
    additionalProperties: false,
    required: ['hasNextPage', 'nextCursor'],
    description: 'LIVE API EXTENSION: where the next page starts.',
    properties: {
      hasNextPage: { type: 'boolean' },
      nextCursor: { type: ['string', 'null'] },
    },
  };
  return out;
}
