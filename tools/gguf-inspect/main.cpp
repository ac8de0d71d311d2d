// gguf-inspect FILE [--json] [--validate]: show what a GGUF file holds and whether ggufd runs it
// (with the hyperparameters it reads, or why it would refuse the file), or check that it is valid.
// Any file of a split set shows the whole set.
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/model/describe.h"
#include "gguf/file.h"
#include "gguf/inspect.h"

namespace {

int usage() {
    std::fprintf(stderr,
                 "usage: gguf-inspect FILE [--json] [--validate] [--array-items N]\n"
                 "  --json          print one JSON document instead of text\n"
                 "  --validate      only check the file: exit 0 if valid, 1 with the error if not\n"
                 "  --array-items N entries of long arrays to show (default 8)\n");
    return 2;
}

// One "  key.sub: value" line per leaf, in the JSON's order.
void print_flat(const nlohmann::ordered_json& j, const std::string& prefix) {
    if (!j.is_object()) {
        const std::string value = j.is_string() ? j.get<std::string>() : j.dump();
        std::printf("  %-32s %s\n", (prefix + ":").c_str(), value.c_str());
        return;
    }
    for (const auto& [key, value] : j.items()) {
        print_flat(value, prefix.empty() ? key : prefix + "." + key);
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string path;
    bool json = false, validate = false;
    size_t array_items = 8;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--json")
            json = true;
        else if (arg == "--validate")
            validate = true;
        else if (arg == "--array-items" && i + 1 < argc)
            try {
                array_items = std::stoul(argv[++i]);
            } catch (const std::exception&) {
                return usage();
            }
        else if (arg == "-h" || arg == "--help")
            return usage();
        else if (!arg.starts_with("--") && path.empty())
            path = arg;
        else
            return usage();
    }
    if (path.empty()) return usage();

    try {
        const gguf::File file = gguf::File::open_set(path);
        if (validate) {
            const size_t files = file.shards().size();
            std::printf("%s: valid GGUF v%u, %zu metadata entries, %zu tensors%s\n", path.c_str(),
                        file.version(), file.metadata().size(), file.tensors().size(),
                        files > 1
                            ? (" in a split set of " + std::to_string(files) + " files").c_str()
                            : "");
            return 0;
        }
        const nlohmann::ordered_json support = ggufd::model::describe_support(file);
        if (json) {
            nlohmann::ordered_json doc = gguf::describe_json(file, array_items);
            doc["ggufd"] = support;
            std::printf("%s\n",
                        doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        } else {
            std::fputs(gguf::describe_text(file, array_items).c_str(), stdout);
            if (support["supported"].get<bool>()) {
                std::printf("\nggufd runs this model:\n");
                print_flat(support["hyperparameters"], "");
            } else {
                std::printf("\nggufd does not run this model: %s\n",
                            support["reason"].get<std::string>().c_str());
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gguf-inspect: %s\n", e.what());
        return 1;
    }
}
