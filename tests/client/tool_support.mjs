// What the client tests share: the tools offered (two functions with one bounded schema), its
// validator, a structured-output schema, and a streamed reply accumulated as clients do, checking each call's deltas (id and
// name first, then argument fragments only).
import Ajv from "ajv";
import assert from "node:assert/strict";

export const parameters = {
  type: "object",
  // Descriptions: Command R+'s template writes each parameter's.
  properties: {
    city: { type: "string", description: "City name", minLength: 1, maxLength: 12 },
    days: { type: "integer", description: "Days ahead", minimum: 1, maximum: 7 },
  },
  required: ["city", "days"],
  additionalProperties: false,
};
export const validate = new Ajv({ strict: true }).compile(parameters);
// A schema a story model can fill in within its budget: bounded strings, an enum, a bounded
// integer, a short array.
export const heroSchema = {
  type: "object",
  properties: {
    hero: { type: "string", minLength: 1, maxLength: 12 },
    mood: { enum: ["happy", "sad", "brave"] },
    age: { type: "integer", minimum: 1, maximum: 99 },
    friends: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 2 },
  },
  required: ["hero", "mood", "age", "friends"],
  additionalProperties: false,
};
export const tools = [
  { type: "function", function: { name: "get_weather", description: "The weather in a city.", parameters } },
  { type: "function", function: { name: "get_time", description: "The time in a city.", parameters } },
];

// `client` streams `request`; the message as a client accumulates it, the finish reason, and how
// many deltas each call came in.
export async function collect(client, request) {
  const message = { role: "assistant", content: "", reasoning_content: "", reasoning: "", tool_calls: [] };
  const fragments = [];
  let finish = null;
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    for (const choice of chunk.choices) {
      const d = choice.delta ?? {};
      message.content += d.content ?? "";
      message.reasoning_content += d.reasoning_content ?? "";
      message.reasoning += d.reasoning ?? "";
      for (const call of d.tool_calls ?? []) {
        const slot = message.tool_calls[call.index];
        if (slot === undefined) {
          assert.equal(call.index, message.tool_calls.length, "calls arrive in order");
          assert.ok(call.id && call.function?.name, "a call's first delta has its id and name");
          message.tool_calls.push({ id: call.id, type: "function", function: { name: call.function.name, arguments: call.function.arguments ?? "" } });
          fragments[call.index] = 1;
        } else {
          assert.equal(call.id, undefined, "only the first delta has the id");
          slot.function.arguments += call.function?.arguments ?? "";
          fragments[call.index] += 1;
        }
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { message, finish, fragments };
}

