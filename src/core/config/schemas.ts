/** Value schemas shared by the sections' fields (zod at the edge). */
import { z } from 'zod';

const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
/** Numeric fields take numbers or numeric strings (env values always arrive as strings). */
export const toNumber = (value: unknown): unknown =>
  typeof value === 'string' && NUMERIC.test(value.trim()) ? Number(value.trim()) : value;
const MAX_INT = 2 ** 31 - 1;
export const wholeAtLeast = (min: number) =>
  z.preprocess(toNumber, z.number().int().min(min).max(MAX_INT));
export const aboveZero = (max?: number) =>
  z.preprocess(toNumber, max === undefined ? z.number().gt(0) : z.number().gt(0).max(max));
/** A boolean, or the words `true`/`false` (env values always arrive as strings). */
export const boolean = () =>
  z.preprocess(
    (value) =>
      typeof value === 'string' && /^(true|false)$/.test(value.trim())
        ? value.trim() === 'true'
        : value,
    z.boolean(),
  );
