#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "tokenizer/utf8.h"

namespace vosti {
namespace {

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  return out;
}

int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[static_cast<size_t>(i)];
    const int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                           : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

std::vector<std::string> decode_byte_level(const std::vector<std::string>& tokens) {
  std::string bytes;
  for (const auto& t : tokens) {
    std::string mapped;
    bool ok = true;
    size_t pos = 0;
    while (pos < t.size() && ok) {
      const int b = gpt2_byte_for_char(next_code_point(t, pos));
      if (b < 0)
        ok = false;
      else
        mapped.push_back(static_cast<char>(b));
    }
    bytes += ok ? mapped : t;
  }
  return {repair_utf8(bytes)};
}

std::vector<std::string> byte_fallback(const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return;
    if (is_valid_utf8(pending))
      out.push_back(pending);
    else
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(kReplacementChar);
    pending.clear();
  };
  for (const auto& t : tokens) {
    const int b = parse_byte_token(t);
    if (b >= 0) {
      pending.push_back(static_cast<char>(b));
    } else {
      flush();
      out.push_back(t);
    }
  }
  flush();
  return out;
}

}  // namespace

Status Decoder::add(const nlohmann::json& j) {
  if (j.is_null()) return Status();
  present_ = true;
  const std::string type = j.value("type", "");
  Step step;
  if (type == "Sequence") {
    for (const auto& sub : j.at("decoders")) VOSTI_RETURN_IF_ERROR(add(sub));
    return Status();
  } else if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
  } else if (type == "Replace") {
    const auto& p = j.at("pattern");
    if (!p.contains("String")) return unimplemented("decoder Replace with a Regex pattern is not supported");
    step.kind = Step::Kind::kReplace;
    step.a = p.at("String").get<std::string>();
    step.b = j.at("content").get<std::string>();
  } else if (type == "ByteFallback") {
    step.kind = Step::Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Step::Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Step::Kind::kStrip;
    step.a = j.at("content").get<std::string>();
    step.start = j.at("start").get<int>();
    step.stop = j.at("stop").get<int>();
  } else if (type == "Metaspace") {
    step.kind = Step::Kind::kMetaspace;
    step.a = j.value("replacement", std::string("\xE2\x96\x81"));
    const std::string scheme = j.contains("prepend_scheme") ? j.at("prepend_scheme").get<std::string>()
                                                            : (j.value("add_prefix_space", true) ? "always" : "never");
    step.prepend = scheme != "never";
  } else {
    return unimplemented(
        "tokenizer.json decoder type '" + type +
        "' is not supported (supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)");
  }
  steps_.push_back(std::move(step));
  return Status();
}

Result<Decoder> Decoder::from_json(const nlohmann::json& j) {
  Decoder d;
  try {
    VOSTI_RETURN_IF_ERROR(d.add(j));
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("malformed tokenizer.json decoder: ") + e.what());
  }
  return d;
}

Decoder Decoder::byte_level() {
  Decoder d;
  d.present_ = true;
  d.steps_.push_back({Step::Kind::kByteLevel, "", "", 0, 0, true});
  return d;
}

Decoder Decoder::sentencepiece(bool strip_leading_space) {
  Decoder d;
  d.present_ = true;
  d.steps_.push_back({Step::Kind::kReplace, "\xE2\x96\x81", " ", 0, 0, true});
  d.steps_.push_back({Step::Kind::kByteFallback, "", "", 0, 0, true});
  d.steps_.push_back({Step::Kind::kFuse, "", "", 0, 0, true});
  if (strip_leading_space) d.steps_.push_back({Step::Kind::kStrip, " ", "", 1, 0, true});
  return d;
}

PieceEncoding Decoder::piece_encoding() const {
  bool byte_fallback = false;
  for (const Step& step : steps_) {
    if (step.kind == Step::Kind::kByteLevel) return PieceEncoding::kByteLevel;
    if (step.kind == Step::Kind::kByteFallback || step.kind == Step::Kind::kMetaspace ||
        (step.kind == Step::Kind::kReplace && step.a == "\xE2\x96\x81"))
      byte_fallback = true;
  }
  return byte_fallback ? PieceEncoding::kByteFallback : PieceEncoding::kRaw;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (!present_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  for (const auto& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kByteLevel:
        tokens = decode_byte_level(tokens);
        break;
      case Step::Kind::kByteFallback:
        tokens = byte_fallback(tokens);
        break;
      case Step::Kind::kReplace:
        for (auto& t : tokens) t = replace_all(t, step.a, step.b);
        break;
      case Step::Kind::kFuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Step::Kind::kStrip:
        for (auto& t : tokens) {
          size_t lead = 0, trail = 0;
          while (static_cast<int>(lead) < step.start && t.compare(lead * step.a.size(), step.a.size(), step.a) == 0)
            ++lead;
          t.erase(0, lead * step.a.size());
          while (static_cast<int>(trail) < step.stop && t.size() >= step.a.size() * (trail + 1) &&
                 t.compare(t.size() - step.a.size() * (trail + 1), step.a.size(), step.a) == 0)
            ++trail;
          t.erase(t.size() - trail * step.a.size());
        }
        break;
      case Step::Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          tokens[i] = replace_all(tokens[i], step.a, " ");
          if (i == 0 && step.prepend && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
        }
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return repair_utf8(out);
}

}  // namespace vosti
