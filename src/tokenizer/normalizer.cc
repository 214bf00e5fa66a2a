#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>
#include <unicode/locid.h>
#include <unicode/unistr.h>

namespace vosti {
namespace {

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

// Full Unicode lowercase mapping (ICU root locale, as Rust's str::to_lowercase).
std::string lowercase(std::string_view s) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

}  // namespace

Status Normalizer::add(const nlohmann::json& j) {
  if (j.is_null()) return Status();
  const std::string type = j.value("type", "");
  Step step;
  if (type == "Sequence") {
    for (const auto& sub : j.at("normalizers")) VOSTI_RETURN_IF_ERROR(add(sub));
    return Status();
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    step.kind = Step::Kind::kUnicode;
    step.form = type == "NFC"    ? UnicodeForm::kNFC
                : type == "NFD"  ? UnicodeForm::kNFD
                : type == "NFKC" ? UnicodeForm::kNFKC
                                 : UnicodeForm::kNFKD;
  } else if (type == "Prepend") {
    step.kind = Step::Kind::kPrepend;
    step.a = j.at("prepend").get<std::string>();
  } else if (type == "Replace") {
    const auto& pattern = j.at("pattern");
    if (!pattern.contains("String")) {
      return unimplemented("tokenizer.json normalizer Replace with a Regex pattern is not supported");
    }
    step.kind = Step::Kind::kReplace;
    step.a = pattern.at("String").get<std::string>();
    step.b = j.at("content").get<std::string>();
  } else if (type == "Lowercase") {
    step.kind = Step::Kind::kLowercase;
  } else {
    return unimplemented("tokenizer.json normalizer type '" + type +
                         "' is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, Prepend, Replace, Lowercase)");
  }
  steps_.push_back(std::move(step));
  return Status();
}

Result<Normalizer> Normalizer::from_json(const nlohmann::json& j) {
  Normalizer n;
  try {
    VOSTI_RETURN_IF_ERROR(n.add(j));
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("malformed tokenizer.json normalizer: ") + e.what());
  }
  return n;
}

Normalizer Normalizer::sentencepiece_legacy() {
  Normalizer n;
  n.steps_.push_back({Step::Kind::kPrepend, UnicodeForm::kNFC, "\xE2\x96\x81", ""});
  n.steps_.push_back({Step::Kind::kReplace, UnicodeForm::kNFC, " ", "\xE2\x96\x81"});
  return n;
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string s(text);
  for (const auto& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kUnicode: {
        auto r = unicode_normalize(s, step.form);
        if (r.ok()) s = std::move(r).value();  // input is valid UTF-8, so ICU does not fail
        break;
      }
      case Step::Kind::kPrepend:
        if (!s.empty()) s = step.a + s;
        break;
      case Step::Kind::kReplace:
        s = replace_all(s, step.a, step.b);
        break;
      case Step::Kind::kLowercase:
        s = lowercase(s);
        break;
    }
  }
  return s;
}

}  // namespace vosti
