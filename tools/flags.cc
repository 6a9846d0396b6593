#include "tools/flags.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>

namespace lookalike {
namespace po = boost::program_options;

std::string Shortest(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (static_cast<float>(std::strtod(buf, nullptr)) == static_cast<float>(v)) break;
  }
  return buf;
}

std::string FlagGroup::LongName(const char* name) {
  const std::string n = name;
  return n.substr(0, n.find(','));
}

void FlagGroup::Number(const char* name, float* field, float def, const char* help) {
  *field = def;
  desc_.add_options()(name, po::value(field)->default_value(def, Shortest(def)), help);
  names_.push_back(LongName(name));
}

void FlagGroup::Number(const char* name, double* field, double def, const char* help) {
  *field = def;
  desc_.add_options()(name, po::value(field)->default_value(def, Shortest(def)), help);
  names_.push_back(LongName(name));
}

void FlagGroup::OnOff(const char* name, bool* field, bool def, const char* help) {
  *field = def;
  const std::string flag = LongName(name);
  Text(name, def ? "on" : "off", help, [field, flag](const std::string& v) {
    if (v == "on" || v == "true" || v == "1" || v == "yes")
      *field = true;
    else if (v == "off" || v == "false" || v == "0" || v == "no")
      *field = false;
    else
      throw std::invalid_argument("--" + flag + " must be on or off, got '" + v + "'");
  });
}

void FlagGroup::Text(const char* name, const std::string& def, const char* help,
                     std::function<void(const std::string&)> parse) {
  texts_.push_back(std::make_unique<std::string>(def));
  std::string* text = texts_.back().get();
  desc_.add_options()(name, po::value(text)->default_value(def), help);
  names_.push_back(LongName(name));
  finishers_.push_back([text, parse = std::move(parse)] { parse(*text); });
}

void FlagGroup::Path(const char* name, std::string* field, const char* help) {
  desc_.add_options()(name, po::value(field), help);
  names_.push_back(LongName(name));
}

void FlagGroup::Paths(const char* name, std::vector<std::string>* field, const char* help) {
  desc_.add_options()(name, po::value(field)->composing(), help);
  names_.push_back(LongName(name));
}

void FlagGroup::Help() { desc_.add_options()("help,h", "show this help"); }

void FlagGroup::Switch(const char* name, bool* field, const char* help) {
  *field = false;
  desc_.add_options()(name, po::bool_switch(field), help);
  names_.push_back(LongName(name));
}

void FlagGroup::Finish() const {
  try {
    for (const auto& finish : finishers_) finish();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

ParsedArgs ParseArgs(const std::vector<std::string>& args, const std::vector<FlagGroup*>& groups,
                     const po::options_description& hidden,
                     const std::vector<std::pair<const char*, int>>& positional) {
  po::options_description all;
  for (const FlagGroup* g : groups) all.add(g->description());
  all.add(hidden);
  po::positional_options_description pos;
  for (const auto& [name, count] : positional) pos.add(name, count);
  ParsedArgs parsed;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), parsed.vm);
    po::notify(parsed.vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  parsed.help = parsed.vm.count("help") > 0;
  if (!parsed.help)
    for (const FlagGroup* g : groups) g->Finish();
  return parsed;
}

void ParseShard(const std::string& text, uint32_t* index, uint32_t* count) {
  *index = *count = 0;
  if (text.empty()) return;
  const size_t slash = text.find('/');
  auto number = [&text](const std::string& part) {
    if (part.empty() || part.size() > 9 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("--shard must be I/N (e.g. 0/4), got '" + text + "'");
    return static_cast<uint32_t>(std::stoul(part));
  };
  if (slash == std::string::npos)
    throw std::invalid_argument("--shard must be I/N (e.g. 0/4), got '" + text + "'");
  *index = number(text.substr(0, slash));
  *count = number(text.substr(slash + 1));
  if (*count == 0) throw std::invalid_argument("--shard I/N needs N >= 1, got '" + text + "'");
}

void PrintHelp(std::ostream& out, const std::string& usage, const std::vector<FlagGroup*>& groups) {
  out << usage;
  bool first = true;
  for (const FlagGroup* g : groups) {
    if (!first) out << "\n";
    out << g->description();
    first = false;
  }
}

}  // namespace lookalike
