#include "webui/webui.h"

namespace ggufd::webui {

const File* find(std::string_view name) {
    for (const File& f : files()) {
        if (f.name == name) return &f;
    }
    return nullptr;
}

}  // namespace ggufd::webui
