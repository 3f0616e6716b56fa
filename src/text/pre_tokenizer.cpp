#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pre_tokenizer.h"

#include "text/utf8.h"

#include <pcre2.h>

#include <algorithm>
#include <array>
#include <string>

namespace strata::text::detail {

namespace {

using SV = std::string_view;

// Regex texts as llama.cpp spells them (src/llama-vocab.cpp, llm_tokenizer_bpe). Non-ASCII characters
// are written as \x{...} escapes so that no editor or normalizer can alter them.
constexpr SV kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr SV kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr SV kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr SV kQwen35 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr SV kDigit = R"re(\p{N})re";
constexpr SV kDigits = R"re(\p{N}+)re";
constexpr SV kDigits3 = R"re(\p{N}{1,3})re";
constexpr SV kThreeAsciiDigits = R"re([0-9][0-9][0-9])re";
constexpr SV kNewline = R"re([\r\n])re";
constexpr SV kCjkDeepseek = R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
constexpr SV kCjkKana = R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
constexpr SV kPoro = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)re";

constexpr std::array kDefaultRegexes{SV(R"re([\p{P}\$\+<=>\^~\|]+)re"), kGpt2, kDigits, kThreeAsciiDigits};
constexpr std::array kGpt2Regexes{kGpt2};
constexpr std::array kLlama3Regexes{kLlama3};
constexpr std::array kQwen2Regexes{kQwen2};
constexpr std::array kQwen35Regexes{kQwen35};
constexpr std::array kFalconRegexes{SV(R"re([\p{P}\$\+<=>\^~\|`]+)re"), kGpt2, kThreeAsciiDigits};
constexpr std::array kStarcoderRegexes{kDigit, kGpt2};
constexpr std::array kDeepseekLlmRegexes{
    kNewline,
    SV(R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})re"
        R"re(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})re"
        R"re(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})re"
        R"re(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})re"
        R"re(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})re"
        R"re(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})re"
        R"re(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})re"
        R"re(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC})re"
        R"re(\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128})re"
        R"re(\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183})re"
        R"re(\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})re"
        R"re(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})re"
        R"re(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})re"
        R"re(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})re"
        R"re(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re"),
    SV(R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re"),
    SV(R"re(\s+$)re"),
    kCjkDeepseek,
    kDigits,
};
constexpr std::array kDeepseekCoderRegexes{kNewline, SV(R"re(\s?\p{L}+)re"), SV(R"re(\s?\p{P}+)re"),
                                           kCjkDeepseek, kDigit};
constexpr std::array kDeepseek3Regexes{
    kDigits3,
    kCjkKana,
    SV(R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"),
};
constexpr std::array kSpark25Regexes{
    kDigits3,
    kCjkKana,
    SV(R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re"),
    kDigit,
};
constexpr std::array kPoroRegexes{kPoro};
constexpr std::array kVikingRegexes{kPoro, kDigit};
constexpr std::array kTekkenRegexes{SV(
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re")};
constexpr std::array kGpt4oRegexes{SV(
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re")};
constexpr std::array kGraniteMultiRegexes{SV(
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re")};
constexpr std::array kSuperBpeRegexes{kDigits, SV(R"re((?=(\d{3})+(?!\d)))re")};
constexpr std::array kBailingRegexes{SV(
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re")};
constexpr std::array kSeedCoderRegexes{SV(
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re")};
constexpr std::array kUfakzekaRegexes{
    SV(R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re")};
constexpr std::array kLagunaRegexes{SV(R"re([^\n]+|[\n]+)re"), kQwen2};
constexpr std::array kExaoneMoeRegexes{SV(
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re")};
constexpr std::array kMiniCpm5Regexes{kDigits3, SV(
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re")};
constexpr std::array kJais2Regexes{SV(
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re")};

// Names per spec (llama.cpp's llama_vocab::impl::load, tokenizer_pre branches).
constexpr std::array kNDefault{SV("default")};
constexpr std::array kNLlama3{SV("llama3"), SV("llama-v3"), SV("llama-bpe"), SV("falcon3"), SV("falcon-h1"),
                              SV("pixtral"), SV("midm-2.0"), SV("lfm2"), SV("jina-v5-nano")};
constexpr std::array kNLlama3Plain{SV("dbrx"), SV("smaug-bpe")};
constexpr std::array kNChatGlm{SV("glm4"), SV("chatglm-bpe")};
constexpr std::array kNDeepseekLlm{SV("deepseek-llm")};
constexpr std::array kNDeepseekCoder{SV("deepseek-coder")};
constexpr std::array kNDeepseek3{SV("deepseek-v3"), SV("hunyuan-dense"), SV("hy_v4"), SV("joyai-llm")};
constexpr std::array kNSpark25{SV("spark2_5")};
constexpr std::array kNFalcon{SV("falcon")};
constexpr std::array kNGpt2{SV("gpt-2"),      SV("phi-2"),       SV("jina-es"),      SV("jina-de"),
                            SV("gigachat"),   SV("jina-v2-es"),  SV("jina-v2-de"),   SV("a.x-4.0"),
                            SV("mellum"),     SV("modern-bert"), SV("exaone4"),      SV("jina-v1-en"),
                            SV("jina-v2-code"), SV("roberta-bpe"), SV("mpt"),        SV("olmo"),
                            SV("jais")};
constexpr std::array kNGpt2NoClean{SV("trillion"), SV("granite-docling")};
constexpr std::array kNStarcoder{SV("starcoder"), SV("refact"), SV("codeshell"), SV("exaone"),
                                 SV("minerva-7b"), SV("mellum2")};
constexpr std::array kNStarcoderNoClean{SV("command-r"), SV("smollm")};
constexpr std::array kNQwen2{SV("qwen2"),  SV("deepseek-r1-qwen"), SV("kormo"),  SV("f2llmv2"),
                             SV("hunyuan"), SV("solar-open"),      SV("grok-2")};
constexpr std::array kNQwen2Clean{SV("megrez"), SV("stablelm2")};
constexpr std::array kNQwen35{SV("qwen35")};
constexpr std::array kNPoro{SV("poro-chat")};
constexpr std::array kNBloom{SV("bloom"), SV("gpt3-finnish")};
constexpr std::array kNViking{SV("viking")};
constexpr std::array kNTekken{SV("tekken")};
constexpr std::array kNGpt4o{SV("gpt-4o"), SV("llama4"), SV("kanana2"), SV("talkie"), SV("minimax-m2")};
constexpr std::array kNGraniteMulti{SV("granite-embed-multi-97m")};
constexpr std::array kNSuperBpe{SV("superbpe")};
constexpr std::array kNBailing{SV("bailingmoe"), SV("bailingmoe2"), SV("llada-moe")};
constexpr std::array kNSeedCoder{SV("seed-coder")};
constexpr std::array kNUfakzeka{SV("ufakzeka")};
constexpr std::array kNLaguna{SV("laguna")};
constexpr std::array kNExaoneMoe{SV("exaone-moe")};
constexpr std::array kNMiniCpm5{SV("minicpm5")};
constexpr std::array kNJais2{SV("jais-2")};

const std::array kSpecs{
    //               names               regexes               ignore add_bos clean  clear_bos
    PreTokenizerSpec{kNDefault,          kDefaultRegexes,       false, false, true,  false},
    PreTokenizerSpec{kNLlama3,           kLlama3Regexes,        true,  true,  true,  false},
    PreTokenizerSpec{kNLlama3Plain,      kLlama3Regexes,        false, false, true,  false},
    PreTokenizerSpec{kNChatGlm,          kLlama3Regexes,        false, false, true,  true},
    PreTokenizerSpec{kNDeepseekLlm,      kDeepseekLlmRegexes,   false, false, false, false},
    PreTokenizerSpec{kNDeepseekCoder,    kDeepseekCoderRegexes, false, false, false, false},
    PreTokenizerSpec{kNDeepseek3,        kDeepseek3Regexes,     false, false, false, false},
    PreTokenizerSpec{kNSpark25,          kSpark25Regexes,       false, false, false, false},
    PreTokenizerSpec{kNFalcon,           kFalconRegexes,        false, false, true,  false},
    PreTokenizerSpec{kNGpt2,             kGpt2Regexes,          false, false, true,  false},
    PreTokenizerSpec{kNGpt2NoClean,      kGpt2Regexes,          false, false, false, false},
    PreTokenizerSpec{kNStarcoder,        kStarcoderRegexes,     false, false, true,  false},
    PreTokenizerSpec{kNStarcoderNoClean, kStarcoderRegexes,     false, false, false, false},
    PreTokenizerSpec{kNQwen2,            kQwen2Regexes,         false, false, false, false},
    PreTokenizerSpec{kNQwen2Clean,       kQwen2Regexes,         false, false, true,  false},
    PreTokenizerSpec{kNQwen35,           kQwen35Regexes,        false, false, false, false},
    PreTokenizerSpec{kNPoro,             kPoroRegexes,          false, false, false, false},
    PreTokenizerSpec{kNBloom,            kPoroRegexes,          false, false, true,  false},
    PreTokenizerSpec{kNViking,           kVikingRegexes,        false, false, false, false},
    PreTokenizerSpec{kNTekken,           kTekkenRegexes,        true,  true,  false, false},
    PreTokenizerSpec{kNGpt4o,            kGpt4oRegexes,         false, false, false, false},
    PreTokenizerSpec{kNGraniteMulti,     kGraniteMultiRegexes,  true,  false, false, false},
    PreTokenizerSpec{kNSuperBpe,         kSuperBpeRegexes,      false, false, false, false},
    PreTokenizerSpec{kNBailing,          kBailingRegexes,       false, false, false, false},
    PreTokenizerSpec{kNSeedCoder,        kSeedCoderRegexes,     false, false, false, false},
    PreTokenizerSpec{kNUfakzeka,         kUfakzekaRegexes,      false, false, false, false},
    PreTokenizerSpec{kNLaguna,           kLagunaRegexes,        false, false, false, false},
    PreTokenizerSpec{kNExaoneMoe,        kExaoneMoeRegexes,     false, false, true,  false},
    PreTokenizerSpec{kNMiniCpm5,         kMiniCpm5Regexes,      true,  false, true,  false},
    PreTokenizerSpec{kNJais2,            kJais2Regexes,         false, false, true,  false},
};

}  // namespace

std::span<const PreTokenizerSpec> all_pre_tokenizers() { return kSpecs; }

const PreTokenizerSpec* find_pre_tokenizer(std::string_view pre) {
  if (pre.empty()) pre = "default";
  for (const PreTokenizerSpec& spec : kSpecs) {
    if (std::find(spec.names.begin(), spec.names.end(), pre) != spec.names.end()) return &spec;
  }
  return nullptr;
}

namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

// Cuts one piece at the matches of `code`: the gap before a match, the match, and the tail all become
// pieces (empty ones are dropped). Empty matches only cut; the scan then steps over one character.
void split_piece(const pcre2_code* code, pcre2_match_data* md, std::string_view text, Piece piece,
                 std::vector<Piece>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + piece.first);
  const size_t len = piece.second - piece.first;
  auto emit = [&](size_t b, size_t e) {
    if (e > b) out.emplace_back(piece.first + b, piece.first + e);
  };
  size_t gap = 0;
  size_t pos = 0;
  uint32_t retry = 0;  // options for re-trying at the position of an empty match
  while (pos <= len) {
    int rc = pcre2_match(code, subject, len, pos, retry | PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, subject, len, pos, retry | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH && retry != 0) {
      retry = 0;
      if (pos >= len) break;
      pos += std::min(utf8_seq_len(subject[pos]), len - pos);
      continue;
    }
    if (rc < 0) break;  // no further match, or a PCRE2 limit: leave the rest as one gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t ms = ov[0];
    const size_t me = ov[1];
    if (ms < gap || me < ms || me > len) break;  // cannot happen without \K; stay safe
    emit(gap, ms);
    emit(ms, me);
    gap = me;
    pos = me;
    retry = (me == ms) ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
  }
  emit(gap, len);
}

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

RegexSplitter::~RegexSplitter() = default;

Result<std::unique_ptr<RegexSplitter>> RegexSplitter::compile(std::span<const std::string_view> regexes) {
  std::unique_ptr<RegexSplitter> splitter(new RegexSplitter());
  for (SV re : regexes) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_offset, nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(err, message, sizeof(message));
      return make_error("pre-tokenizer regex /{}/ does not compile at offset {}: {}", re, err_offset,
                        reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: the interpreter is used if JIT is unavailable
    auto compiled = std::make_unique<Compiled>();
    compiled->code = code;
    splitter->compiled_.push_back(std::move(compiled));
  }
  return splitter;
}

std::vector<Piece> RegexSplitter::split(std::string_view text) const {
  std::vector<Piece> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(0, text.size());
  std::vector<Piece> next;
  for (const auto& compiled : compiled_) {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
        pcre2_match_data_create_from_pattern(compiled->code, nullptr));
    if (!md) break;  // out of memory: keep the coarser split
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const Piece& piece : pieces) split_piece(compiled->code, md.get(), text, piece, next);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace strata::text::detail
