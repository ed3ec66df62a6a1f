#include "client/exact_json.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "core/float_rounding.h"

namespace tensorop::client {
namespace {

using Json = nlohmann::json;

// Builds the DOM from nlohmann's SAX events, as nlohmann's own parser does, except
// for the numbers ParseJson documents.
class DomBuilder {
 public:
  explicit DomBuilder(Json* root) : root_(root) {}

  bool null() { return Add(Json(nullptr)); }
  bool boolean(bool value) { return Add(Json(value)); }
  bool number_integer(Json::number_integer_t value) { return Add(Json(value)); }
  bool number_unsigned(Json::number_unsigned_t value) { return Add(Json(value)); }
  bool number_float(Json::number_float_t value, const Json::string_t& text) {
    if (RoundToFloat32(value).was_tie || RoundToFloat16(value).was_tie ||
        RoundToBfloat16(value).was_tie) {
      return Add(Json::binary(std::vector<uint8_t>(text.begin(), text.end())));
    }
    return Add(Json(value));
  }
  bool string(Json::string_t& value) { return Add(Json(std::move(value))); }
  bool binary(Json::binary_t& value) { return Add(Json(std::move(value))); }
  bool start_object(std::size_t) {
    open_.push_back(Place(Json::object()));
    return true;
  }
  bool key(Json::string_t& key) {
    key_ = std::move(key);
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    open_.push_back(Place(Json::array()));
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const Json::exception& error) {
    error_ = error.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool Add(Json value) {
    Place(std::move(value));
    return true;
  }
  // Puts `value` where the document is at and returns where it went. Only the open
  // containers are held by pointer, and nothing is added to those but at their end
  // while a child is open, so the pointers stay valid.
  Json* Place(Json value) {
    if (open_.empty()) {
      *root_ = std::move(value);
      return root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    Json& slot = parent[key_];
    slot = std::move(value);
    return &slot;
  }

  Json* root_;
  std::vector<Json*> open_;
  std::string key_;
  std::string error_;
};

}  // namespace

using Json = nlohmann::json;

std::string DescribeJson(const Json& value) {
  if (value.is_binary()) return std::string(value.get_binary().begin(), value.get_binary().end());
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string JsonString(absl::string_view text) {
  return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool IsFloatNumber(const Json& value) { return value.is_number_float() || value.is_binary(); }

std::string DecimalText(const Json& value) {
  return std::string(value.get_binary().begin(), value.get_binary().end());
}

// The nearest double to a float JSON number.
double NearestDouble(const Json& value) {
  if (value.is_binary()) return std::strtod(DecimalText(value).c_str(), nullptr);
  return value.get<double>();
}

absl::StatusOr<Json> ParseJson(absl::string_view text) {
  Json root;
  DomBuilder builder(&root);
  if (!Json::sax_parse(text.begin(), text.end(), &builder)) {
    return absl::InvalidArgumentError(builder.error());
  }
  return root;
}

}  // namespace tensorop::client
