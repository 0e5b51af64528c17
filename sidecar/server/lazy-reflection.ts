// gRPC server reflection, loaded on its first call. Building the reflection service parses every
// served .proto (protobufjs) and keeps their descriptors: ~16 MiB of a sidecar that idles on every
// node, for a service only an operator with grpcurl ever calls. So the port serves both reflection
// versions from the start with byte-level handlers, and the real service is built when a stream
// opens; each stream is then handed to it through an adapter that (de)serialises with its codecs.
import { EventEmitter } from "node:events";
import * as grpc from "@grpc/grpc-js";

/** What the real reflection service needs of a server: addService, captured here. */
interface Registrar {
  addToServer(server: Pick<grpc.Server, "addService">): void;
}

type Codec = Pick<grpc.MethodDefinition<unknown, unknown>, "requestDeserialize" | "responseSerialize">;
type Handler = (stream: EventEmitter & { write(m: unknown): boolean; end(): void }) => void;

const METHODS = ["/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"];

const bytes = (b: Buffer) => b;

export function addLazyReflection(server: grpc.Server, load: () => Promise<Registrar>): void {
  let real: Promise<Map<string, { codec: Codec; handler: Handler }>> | undefined;
  const loadOnce = () =>
    (real ??= load().then((service) => {
      const byPath = new Map<string, { codec: Codec; handler: Handler }>();
      service.addToServer({
        addService(def: grpc.ServiceDefinition, impl: grpc.UntypedServiceImplementation) {
          for (const [name, m] of Object.entries(def)) byPath.set(m.path, { codec: m, handler: impl[name] as unknown as Handler });
        },
      });
      return byPath;
    }));
  for (const path of METHODS) {
    const def: grpc.MethodDefinition<Buffer, Buffer> = {
      path,
      requestStream: true,
      responseStream: true,
      requestSerialize: bytes,
      requestDeserialize: bytes,
      responseSerialize: bytes,
      responseDeserialize: bytes,
    };
    server.addService(
      { ServerReflectionInfo: def },
      {
        ServerReflectionInfo: (stream: grpc.ServerDuplexStream<Buffer, Buffer>) => {
          loadOnce().then(
            (byPath) => {
              const { codec, handler } = byPath.get(path)!;
              // Messages wait in the paused stream until these listeners are attached.
              const adapted = Object.assign(new EventEmitter(), {
                write: (m: unknown) => stream.write(codec.responseSerialize(m)),
                end: () => stream.end(),
              });
              stream.on("data", (b: Buffer) => adapted.emit("data", codec.requestDeserialize(b)));
              stream.on("end", () => adapted.emit("end"));
              handler(adapted);
            },
            (err: unknown) => {
              real = undefined;
              stream.emit("error", { code: grpc.status.INTERNAL, details: `reflection unavailable: ${err instanceof Error ? err.message : String(err)}` });
            },
          );
        },
      },
    );
  }
}
