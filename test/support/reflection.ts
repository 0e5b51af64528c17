// A gRPC reflection client (v1), as grpcurl uses it: one request per stream, its one answer.
import { createRequire } from "node:module";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

export interface Reflection {
  /** The names of the services the server says it serves, sorted. */
  services(): Promise<string[]>;
  /** The serialized file descriptors that define `symbol`, as one latin1 string to search. */
  describe(symbol: string): Promise<string>;
  close(): void;
}

/** The reflection v1 service's generic client (field names as the .proto spells them), for tests that drive a stream themselves. */
export function reflectionStub(address: string): any {
  const file = createRequire(import.meta.url).resolve("@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto");
  const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(file, { keepCase: true })) as any;
  return new pkg.grpc.reflection.v1.ServerReflection(address, grpc.credentials.createInsecure());
}

export function reflectionClient(address: string): Reflection {
  const client = reflectionStub(address);
  const ask = (request: Record<string, string>) =>
    new Promise<any>((resolve, reject) => {
      const stream = client.ServerReflectionInfo({ deadline: Date.now() + 5000 });
      stream.on("data", (r: any) => {
        if (r.error_response) reject(new Error(`${JSON.stringify(request)}: ${r.error_response.error_message}`));
        else resolve(r);
        stream.end();
      });
      stream.on("error", reject);
      stream.write(request);
    });
  return {
    services: async () => (await ask({ list_services: "" })).list_services_response.service.map((s: { name: string }) => s.name).sort(),
    describe: async (symbol) =>
      Buffer.concat((await ask({ file_containing_symbol: symbol })).file_descriptor_response.file_descriptor_proto).toString("latin1"),
    close: () => client.close(),
  };
}
