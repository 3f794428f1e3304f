// webpack's defaults for the browser and for node (CommonJS: .cjs in a "type": "module" app).
const app = (target, filename) => ({
  mode: "production",
  context: import.meta.dirname,
  entry: "./src/app.mjs",
  target,
  output: { path: `${import.meta.dirname}/dist/webpack-${target}`, filename },
});

export default [app("web", "app.js"), app("node", "app.cjs")];
