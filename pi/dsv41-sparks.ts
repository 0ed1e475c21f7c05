// Pi extension for the dsv41-sparks provider (installed by pi/install.sh into
// <agent-dir>/extensions/). Pi always sends an output-token limit (min(maxTokens, 32000) in
// 0.73); for this provider the limit is removed so answers end at EOS and a low context estimate
// never pushes prompt + limit past the server's window (api-and-clients.md §1.5). The bearer key
// is resolved by the provider's apiKey command (`!printenv DSV41_API_KEY`) when a request is
// made; nothing here or in models.json holds the key. Type-only import: erased at load time.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const PROVIDER = "dsv41-sparks";

export default function (pi: ExtensionAPI) {
  pi.on("before_provider_request", (event: any, ctx: any) => {
    if (ctx?.model?.provider !== PROVIDER) return undefined;
    if (!process.env.DSV41_API_KEY) {
      throw new Error("dsv41-sparks: DSV41_API_KEY is not set in the shell that started pi");
    }
    const { max_tokens, max_completion_tokens, ...payload } = event.payload ?? {};
    return payload;
  });
}
