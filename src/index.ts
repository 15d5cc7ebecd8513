export * from './protocol/index.js';
