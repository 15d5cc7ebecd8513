// Fails unless node-ipc and its transitive packages are installed at exactly the
// reviewed versions and integrity hashes (.ci/reviewed-pins.json).
import { readFileSync } from 'node:fs';

const reviewed = JSON.parse(
  readFileSync(new URL('./reviewed-pins.json', import.meta.url), 'utf8'),
).packages;
const lock = JSON.parse(
  readFileSync(new URL('../package-lock.json', import.meta.url), 'utf8'),
).packages;
const problems = [];
for (const [name, pin] of Object.entries(reviewed)) {
  const locked = lock[`node_modules/${name}`];
  const installed = JSON.parse(
    readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8'),
  );
  if (locked?.version !== pin.version || locked?.integrity !== pin.integrity) {
    problems.push(
      `${name}: the lockfile has ${locked?.version} ${locked?.integrity}, reviewed is ${pin.version} ${pin.integrity}`,
    );
  }
  if (installed.version !== pin.version)
    problems.push(`${name}: installed ${installed.version}, reviewed ${pin.version}`);
}
const nested = Object.keys(lock).filter(
  (key) =>
    /node_modules\/.+\/node_modules\//.test(key) &&
    Object.keys(reviewed).some((n) => key.endsWith(`/${n}`)),
);
for (const key of nested) problems.push(`${key}: a second copy of a reviewed package`);
if (problems.length > 0) {
  console.error(`supply chain: unreviewed change\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(
  `supply chain: ${Object.keys(reviewed).length} reviewed packages at their pinned integrity`,
);
