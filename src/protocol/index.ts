export * from './errors.js';
export * from './frames.js';
export * from './json-schema.js';
export * from './limits.js';
export * from './notification-guards.js';
export * from './notifications.js';
export * from './validate.js';
export * from './wire.js';
