// The official OpenAI client's audio.transcriptions.create and audio.translations.create against
// ggufd serving the conformance folder's Whisper model: the greedy text of each WAV is
// whisper.cpp's, and text, srt, vtt and verbose_json answers come back in the shapes the client
// reads.
// Usage: node audio_test.mjs BASE_URL WHISPER_MODEL WHISPER_DIR
import OpenAI, { toFile } from "openai";
import assert from "node:assert/strict";
import { createReadStream, readFileSync } from "node:fs";

const [baseURL, model, dir] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60_000 });

for (const name of ["tones", "chirp"]) {
  const meta = JSON.parse(readFileSync(`${dir}/${name}.json`, "utf8"));
  const r = await client.audio.transcriptions.create({
    file: createReadStream(`${dir}/${name}.wav`),
    model,
    language: "en",
    temperature: 0,
  });
  assert.equal(r.text, meta.text, `${name}: not whisper.cpp's greedy text`);
}

const wav = readFileSync(`${dir}/chirp.wav`);
const text = await client.audio.transcriptions.create({
  file: await toFile(wav, "chirp.wav"),
  model,
  response_format: "text",
});
assert.equal(typeof text, "string");
assert.ok(text.length > 0);

const verbose = await client.audio.transcriptions.create({
  file: await toFile(wav, "chirp.wav"),
  model,
  language: "en",
  response_format: "verbose_json",
  timestamp_granularities: ["segment"],
});
assert.equal(verbose.language, "en");
assert.ok(Math.abs(verbose.duration - 3.0) < 1e-9);
assert.ok(verbose.segments.length >= 1);
for (const s of verbose.segments) {
  assert.ok(s.start >= 0 && s.end >= s.start && s.end <= 3.0 + 1e-9, JSON.stringify(s));
  assert.ok(Array.isArray(s.tokens));
}

const srt = await client.audio.transcriptions.create({
  file: await toFile(wav, "chirp.wav"),
  model,
  response_format: "srt",
});
assert.match(srt, /^1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n/);
const vtt = await client.audio.transcriptions.create({
  file: await toFile(wav, "chirp.wav"),
  model,
  response_format: "vtt",
});
assert.match(vtt, /^WEBVTT\n\n00:00:\d\d\.\d{3} --> /);

const translated = await client.audio.translations.create({
  file: await toFile(wav, "chirp.wav"),
  model,
});
assert.equal(typeof translated.text, "string");

// The client's error for a refused file carries the server's reason.
await assert.rejects(
  client.audio.transcriptions.create({ file: await toFile(Buffer.from("RIFF?"), "x.wav"), model }),
  (e) => e.status === 400 && /could not be decoded/.test(e.message),
);

const models = await client.models.list();
const listed = models.data.find((m) => m.id === model);
assert.deepEqual(listed.capabilities, ["transcription"]);
console.log("audio_test: ok");
