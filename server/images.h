// Images as the dialects send them, read once while a request is parsed: OpenAI's image_url
// data URLs, Anthropic's base64 image sources and Ollama's base64 `images` all become the
// encoded bytes of ChatRequest::images, each leaving the marker (vision::kMediaMarker) in its
// message's text where the model's template will render it. Pixels are decoded later, against
// the model's projector (EngineBackend::tokenize_chat_prompt).
#pragma once

#include <string>
#include <string_view>

namespace ggufd::server {

// Standard base64 (RFC 4648, padding optional, whitespace skipped). Throws ApiError 400 naming
// `where` for anything else.
std::string decode_base64(std::string_view text, const std::string& where, const char* param);

// The bytes of an image URL: a data URL ("data:image/png;base64,..."). http(s) URLs are refused
// with a 400 saying this server does not fetch images; anything else is a 400 too.
std::string image_from_url(std::string_view url, const std::string& where, const char* param);

// An OpenAI content part for an image given as base64 with its media type (Anthropic's source,
// Ollama's images): {"type": "image_url", "image_url": {"url": "data:...;base64,..."}}.
std::string data_url(std::string_view media_type, std::string_view base64);

}  // namespace ggufd::server
