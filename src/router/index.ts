export * from './gate.js';
export * from './notifications.js';
export * from './router.js';
