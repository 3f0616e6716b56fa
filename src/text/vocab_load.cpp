// Vocab::load: reads the tokenizer.* metadata the way llama.cpp's llama_vocab::impl::load does
// (defaults per model, key overrides, special-token detection by text, end-of-generation set).
#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <span>
#include <limits>

#include "gguf/names.h"
#include "text/utf8.h"
#include "text/vocab_impl.h"

namespace strata::text {

Result<std::shared_ptr<const Vocab>> Vocab::load(const gguf::File& file) {
  auto vocab = std::make_shared<detail::VocabImpl>();
  Status status = vocab->load(file);
  if (!status.ok()) {
    const std::string& message = status.error().message;
    if (message.rfind(file.path(), 0) == 0) return status.error();  // the GGUF reader named the file already
    return make_error("{}: tokenizer: {}", file.path(), message);
  }
  return std::shared_ptr<const Vocab>(std::move(vocab));
}

namespace detail {

namespace {

using SV = std::string_view;
namespace names = gguf::names;
namespace tok = gguf::names::tokenizer;

// "<｜end▁of▁sentence｜>" and friends (U+FF5C FULLWIDTH VERTICAL LINE, U+2581 LOWER ONE EIGHTH BLOCK).
#define STRATA_FW_BAR "\xEF\xBD\x9C"
#define STRATA_SPM_SPACE "\xE2\x96\x81"
constexpr SV kDeepseekEos =
    "<" STRATA_FW_BAR "end" STRATA_SPM_SPACE "of" STRATA_SPM_SPACE "sentence" STRATA_FW_BAR ">";

// Texts llama.cpp recognises as special tokens when the file does not name them (first match wins).
constexpr SV kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", kDeepseekEos, "<end_of_utterance>"};
constexpr SV kEomTexts[] = {"<|eom_id|>"};
constexpr SV kFimPreTexts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                               "<" STRATA_FW_BAR "fim" STRATA_SPM_SPACE "begin" STRATA_FW_BAR ">",
                               "<PRE>", STRATA_SPM_SPACE "<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr SV kFimSufTexts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                               "<" STRATA_FW_BAR "fim" STRATA_SPM_SPACE "hole" STRATA_FW_BAR ">",
                               "<SUF>", STRATA_SPM_SPACE "<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr SV kFimMidTexts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                               "<" STRATA_FW_BAR "fim" STRATA_SPM_SPACE "end" STRATA_FW_BAR ">",
                               "<MID>", STRATA_SPM_SPACE "<MID>", "<|code_middle|>", "<|middle|>"};
constexpr SV kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr SV kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr SV kFimSepTexts[] = {"<|file_sep|>"};
// Tokens that end generation whatever the file says (they are also forced to CONTROL).
constexpr SV kEogTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                            "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                            "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                            "<turn|>", "<|tool_response>", kDeepseekEos, "[e~["};
#undef STRATA_FW_BAR
#undef STRATA_SPM_SPACE

uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

std::string ascii_lower(SV s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A string key's value, or "" when it is missing or not a string (only used for name heuristics).
SV string_or_empty(const gguf::File& file, SV key) {
  auto value = file.get_string_or(key, "");
  return value.ok() ? value.value() : SV();
}

bool contains_any(SV s, std::initializer_list<SV> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](SV p) { return s.find(p) != SV::npos; });
}

}  // namespace

Status VocabImpl::load(const gguf::File& file) {
  STRATA_ASSIGN(const SV model, file.get_string(tok::kModel));
  STRATA_ASSIGN(const SV pre, file.get_string_or(tok::kPre, ""));

  const PreTokenizerSpec* spec = nullptr;
  if (model == "llama") {
    kind_ = VocabKind::Spm;
    bos_ = 1, eos_ = 2, unk_ = 0;
    add_space_prefix_ = true, add_bos_ = true, clean_spaces_ = false;
  } else if (model == "gpt2") {
    kind_ = VocabKind::Bpe;
    bos_ = 11, eos_ = 11;
    spec = find_pre_tokenizer(pre);
    if (spec == nullptr) return make_error("unknown pre-tokenizer type '{}' (tokenizer.ggml.pre)", pre);
    ignore_merges_ = spec->ignore_merges;
    add_bos_ = spec->add_bos;
    clean_spaces_ = spec->clean_spaces;
    if (spec->clear_bos) bos_ = -1;
  } else if (model == "bert") {
    if (!wpm_supported()) return make_error("WordPiece (bert) tokenizers need ICU, which this build lacks");
    kind_ = VocabKind::Wpm;
    bos_ = 101, unk_ = 100, sep_ = 102, pad_ = 0, mask_ = 103;
    add_bos_ = true, add_sep_ = true, clean_spaces_ = true;
  } else {
    return make_error("unsupported tokenizer model '{}' (tokenizer.ggml.model); supported: llama, gpt2, bert",
                      model);
  }
  STRATA_ASSIGN(add_space_prefix_, file.get_bool_or(tok::kAddSpacePrefix, add_space_prefix_));

  STRATA_TRY(load_tokens(file));
  if (kind_ == VocabKind::Bpe) {
    STRATA_TRY(load_merges(file));
    STRATA_ASSIGN(splitter_, RegexSplitter::compile(spec->regexes));
  }
  STRATA_TRY(load_special_ids(file));

  STRATA_ASSIGN(add_bos_, file.get_bool_or(tok::kAddBos, add_bos_));
  STRATA_ASSIGN(add_eos_, file.get_bool_or(tok::kAddEos, add_eos_));
  STRATA_ASSIGN(add_sep_, file.get_bool_or(tok::kAddSep, add_sep_));
  if (add_bos_ && bos_ < 0) return make_error("tokenizer.ggml.add_bos_token is true, but there is no BOS token");
  if (add_eos_ && eos_ < 0) return make_error("tokenizer.ggml.add_eos_token is true, but there is no EOS token");
  if (add_sep_ && sep_ < 0) return make_error("tokenizer.ggml.add_sep_token is true, but there is no SEP token");

  STRATA_ASSIGN(lowercase_, file.get_bool_or(tok::kNormalizerLowercase, true));
  STRATA_ASSIGN(strip_accents_, file.get_bool_or(tok::kNormalizerStripAccents, lowercase_));

  detect_special_tokens();
  build_special_cache(file);
  build_byte_tokens();
  return ok_status();
}

Status VocabImpl::load_tokens(const gguf::File& file) {
  STRATA_ASSIGN(const auto texts, file.get_string_array(tok::kTokens));
  const size_t n = texts.size();
  if (n == 0) return make_error("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return make_error("tokenizer.ggml.tokens has {} entries, more than a token id can hold", n);
  }

  std::vector<float> scores;
  if (file.has(tok::kScores)) {
    auto f32 = file.get_f32_array(tok::kScores);
    if (f32.ok()) {
      scores = std::move(f32).value();
    } else {
      auto ints = file.get_int_array(tok::kScores);
      if (!ints.ok()) return make_error("tokenizer.ggml.scores must be an f32 or i32 array");
      for (int64_t v : ints.value()) scores.push_back(static_cast<float>(v));
    }
    if (scores.size() < n) return make_error("tokenizer.ggml.scores has {} entries for {} tokens", scores.size(), n);
  }
  std::vector<int64_t> types;
  if (file.has(tok::kTokenType)) {
    STRATA_ASSIGN(types, file.get_int_array(tok::kTokenType));
    if (types.size() < n) return make_error("tokenizer.ggml.token_type has {} entries for {} tokens", types.size(), n);
  }

  // Empty texts become "[EMPTY_<id>]" as in llama.cpp, so every token has a findable text.
  auto stored_text = [&](size_t i) -> std::string {
    return texts[i].empty() ? fmt::format("[EMPTY_{}]", i) : std::string();
  };
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += texts[i].empty() ? stored_text(i).size() : texts[i].size();
  arena_.clear();
  arena_.reserve(total);
  tokens_.assign(n, TokenInfo{});
  ids_.clear();
  ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t at = arena_.size();
    if (texts[i].empty()) arena_ += stored_text(i);
    else arena_.append(texts[i]);
    TokenInfo& info = tokens_[i];
    info.text = SV(arena_).substr(at);
    info.score = scores.empty() ? 0.0f : scores[i];
    info.attr = types.empty() ? kAttrNormal : attr_from_type(types[i]);
    max_token_len_ = std::max(max_token_len_, info.text.size());
    const auto [it, inserted] = ids_.emplace(info.text, static_cast<Token>(i));
    if (!inserted) return make_error("duplicate token in vocabulary: '{}' has ids {} and {}", info.text, it->second, i);
  }
  return ok_status();
}

Status VocabImpl::load_merges(const gguf::File& file) {
  if (!file.has(tok::kMerges)) return make_error("BPE vocab without tokenizer.ggml.merges");
  STRATA_ASSIGN(const auto merges, file.get_string_array(tok::kMerges));
  if (merges.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return make_error("tokenizer.ggml.merges has too many entries ({})", merges.size());
  }
  ranks_.clear();
  ranks_.reserve(merges.size());
  ranks_by_text_.clear();
  for (size_t i = 0; i < merges.size(); ++i) {
    // "A B": split at the first space after position 0 (a merge may start with a space).
    const SV merge = merges[i];
    const size_t pos = merge.find(' ', 1);
    const SV left = pos == SV::npos ? SV() : merge.substr(0, pos);
    const SV right = pos == SV::npos ? SV() : merge.substr(pos + 1);
    const Token l = find(left);
    const Token r = find(right);
    const auto rank = static_cast<int32_t>(i);
    if (l >= 0 && r >= 0) {
      ranks_.try_emplace((static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r), rank);
    } else {
      ranks_by_text_.try_emplace(fmt::format("{}:{}{}", left.size(), left, right), rank);
    }
  }
  return ok_status();
}

Status VocabImpl::load_special_ids(const gguf::File& file) {
  const std::pair<SV, Token*> keys[] = {
      {tok::kBosId, &bos_},         {tok::kEosId, &eos_},
      {tok::kEotId, &eot_},         {tok::kEomId, &eom_},
      {tok::kUnknownId, &unk_},     {tok::kSeparatorId, &sep_},
      {tok::kPaddingId, &pad_},     {tok::kMaskId, &mask_},
      {tok::kFimPreId, &fim_pre_}, {tok::kFimSufId, &fim_suf_},
      {tok::kFimMidId, &fim_mid_}, {tok::kFimPadId, &fim_pad_},
      {tok::kFimRepId, &fim_rep_}, {tok::kFimSepId, &fim_sep_},
      // deprecated spellings, read after the current ones as llama.cpp does
      {tok::kPrefixId, &fim_pre_},  {tok::kSuffixId, &fim_suf_},
      {tok::kMiddleId, &fim_mid_},
  };
  for (const auto& [key, id] : keys) {
    if (!valid(*id)) *id = -1;  // a default that the vocab is too small for
    if (!file.has(key)) continue;
    STRATA_ASSIGN(const int64_t value, file.get_int(key));
    // Out-of-range ids (0xFFFFFFFF is the usual "unset") keep the default, as in llama.cpp.
    if (value >= 0 && value < static_cast<int64_t>(tokens_.size())) *id = static_cast<Token>(value);
  }
  return ok_status();
}

void VocabImpl::detect_special_tokens() {
  auto force_control = [&](Token t) { tokens_[t].attr |= kAttrControl; };
  auto detect = [&](Token& id, std::span<const SV> texts) {
    if (id >= 0) return;
    for (SV text : texts) {
      const Token t = find(text);
      if (t >= 0) {
        id = t;
        force_control(t);
        return;
      }
    }
  };
  detect(eot_, kEotTexts);
  detect(eom_, kEomTexts);
  detect(fim_pre_, kFimPreTexts);
  detect(fim_suf_, kFimSufTexts);
  detect(fim_mid_, kFimMidTexts);
  detect(fim_pad_, kFimPadTexts);
  detect(fim_rep_, kFimRepTexts);
  detect(fim_sep_, kFimSepTexts);

  // Control tokens named "...unused..." are unused.
  for (TokenInfo& info : tokens_) {
    if ((info.attr & kAttrControl) && info.text.find("unused") != SV::npos) info.attr |= kAttrUnused;
  }

  eog_.clear();
  for (Token t : {fim_pad_, fim_rep_, fim_sep_}) {
    if (t >= 0) eog_.push_back(t);
  }
  for (SV text : kEogTexts) {
    const Token t = find(text);
    if (t < 0) continue;
    eog_.push_back(t);
    force_control(t);
  }
  // gpt-oss: these always render.
  for (SV text : {SV("<|channel|>"), SV("<|message|>"), SV("<|start|>"), SV("<|constrain|>")}) {
    if (const Token t = find(text); t >= 0) tokens_[t].attr = kAttrUserDefined;
  }
  for (Token t : {eos_, eot_, eom_}) {
    if (t >= 0) eog_.push_back(t);
  }
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());

  auto in_eog = [&](SV text) {
    const Token t = find(text);
    return t >= 0 && std::binary_search(eog_.begin(), eog_.end(), t) ? t : Token{-1};
  };
  // o200k_harmony / solar-open: "<|end|>" separates turns there and must not stop generation.
  const Token end = in_eog("<|end|>");
  const bool has_call = in_eog("<|call|>") >= 0 || in_eog("<|calls|>") >= 0;
  if (end >= 0 && has_call && (in_eog("<|return|>") >= 0 || in_eog("<|flush|>") >= 0)) {
    eog_.erase(std::find(eog_.begin(), eog_.end(), end));
    tokens_[end].attr = kAttrUserDefined;
  }
  // gemma4 / paddleocr: "</s>" is an ordinary token when "<|tool_response>" exists.
  const Token s_end = in_eog("</s>");
  if (s_end >= 0 && in_eog("<|tool_response>") >= 0) {
    eog_.erase(std::find(eog_.begin(), eog_.end(), s_end));
    tokens_[s_end].attr = kAttrNormal;
  }
}

void VocabImpl::build_special_cache(const gguf::File& file) {
  special_tokens_.clear();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      special_tokens_.push_back(static_cast<Token>(i));
    }
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](Token a, Token b) { return tokens_[a].text.size() > tokens_[b].text.size(); });

  // Per-model whitespace stripping around special tokens (llama.cpp decides this by name).
  const std::string name = ascii_lower(string_or_empty(file, names::kName));
  const SV pre = string_or_empty(file, tok::kPre);
  const SV arch = string_or_empty(file, names::kArchitecture);
  auto set_attr = [&](SV text, uint32_t attr, bool on) {
    const Token t = find(text);
    if (t < 0) return;
    tokens_[t].attr = on ? (tokens_[t].attr | attr) : (tokens_[t].attr & ~attr);
  };
  if (contains_any(pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set_attr("<mask>", kAttrLstrip, true);
  } else if (contains_any(name, {"phi-3", "phi3"})) {
    for (Token t : special_tokens_) tokens_[t].attr |= kAttrRstrip;
    set_attr("</s>", kAttrRstrip, true);
    for (SV text : {SV("<unk>"), SV("<s>"), SV("<|endoftext|>")}) set_attr(text, kAttrRstrip, false);
  } else if (contains_any(name, {"modern-bert"})) {
    set_attr("[MASK]", kAttrLstrip, true);
  }
}

void VocabImpl::build_byte_tokens() {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char raw = static_cast<char>(b);
    Token t = -1;
    if (kind_ == VocabKind::Spm) {
      const char hex[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      t = find(SV(hex, sizeof(hex)));
    }
    if (t < 0) t = find(SV(&raw, 1));
    byte_tokens_[b] = t;
  }
}

TokenType VocabImpl::token_type(Token t) const {
  if (!valid(t)) return TokenType::Undefined;
  const uint32_t attr = tokens_[t].attr;
  if (attr & kAttrControl) return TokenType::Control;
  if (attr & kAttrUserDefined) return TokenType::UserDefined;
  if (attr & kAttrUnknown) return TokenType::Unknown;
  if (attr & kAttrByte) return TokenType::Byte;
  if (attr & kAttrUnused) return TokenType::Unused;
  if (attr & kAttrNormal) return TokenType::Normal;
  return TokenType::Undefined;
}

bool VocabImpl::is_eog(Token t) const { return t >= 0 && std::binary_search(eog_.begin(), eog_.end(), t); }

}  // namespace detail
}  // namespace strata::text
