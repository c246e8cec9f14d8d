# Operator image: `docker build -t gpuvm-operator:0.1.0 .` (no image is published yet).
# Node 24 runs the TypeScript sources directly (type stripping), so there is no build step; only production
# dependencies are installed, and the compile cache is filled. The manifests in deploy/ and charts/ run
# `node /app/src/cli/main.ts run …`.
FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production
# The operator's V8 flags (src/cli/node-flags.ts): a young generation of at most 4 MiB per semi-space, two helper
# threads. The run command sets --heap-growing-percent=50 itself (Node refuses it in NODE_OPTIONS).
ENV NODE_OPTIONS="--max-semi-space-size=4 --v8-pool-size=2"
# glibc's malloc returns large freed blocks to the system instead of keeping them in its heaps (OPERATOR_ENVIRONMENT).
ENV MALLOC_MMAP_THRESHOLD_=131072
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY src ./src
COPY crds ./crds
# The compile cache (src/cli/node-flags.ts): every module of the run command stripped and compiled once, here, so
# that the operator never loads type stripping's parser (14-24 MiB less memory, half the start-up time). Node keys
# the cache by user id (a subdirectory per uid), so it is filled as the user the operator runs as (the manifests'
# runAsUser); another uid finds no cache and runs without one. Read-only at run time (readOnlyRootFilesystem):
# Node reads it and quietly skips writing.
ENV NODE_COMPILE_CACHE=/app/.node-compile-cache
RUN mkdir /app/.node-compile-cache && chown 65532:65532 /app/.node-compile-cache
USER 65532:65532
RUN node /app/src/cli/main.ts run --help > /dev/null
ENTRYPOINT ["node", "/app/src/cli/main.ts"]
CMD ["run"]
