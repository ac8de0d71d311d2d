// Split models: a set written with split_file opens as one File (tensors resolved across the
// files, each read from its own mapping), and every inconsistency between the files is refused
// with a message naming the file and what is wrong.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/inspect.h"
#include "gguf/split.h"
#include "gguf/writer.h"

namespace {

namespace fs = std::filesystem;

// A model of seven F32 tensors whose values tell them apart.
gguf::Writer model_writer() {
    gguf::Writer w;
    w.set("general.architecture", "llama");
    w.set("general.name", "split test");
    for (int t = 0; t < 7; ++t) {
        std::vector<float> v(8 * (t + 1));
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t * 1000 + i);
        w.add_tensor("blk." + std::to_string(t) + ".w", {8, t + 1}, v);
    }
    return w;
}

class SplitSet : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("ggufd_split_" + std::to_string(getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
        whole_ = gguf::File::from_bytes(model_writer().to_bytes(), "whole");
        writers_ = gguf::split_file(*whole_, 3);  // 3 + 3 + 1 tensors
    }
    void TearDown() override { fs::remove_all(dir_); }

    fs::path prefix() const { return dir_ / "m"; }
    fs::path path(uint32_t no) const { return gguf::split_path(prefix(), no, 3); }
    void write_all() {
        for (uint32_t i = 0; i < writers_.size(); ++i) writers_[i].write(path(i));
    }
    std::string open_error(const fs::path& p) {
        try {
            gguf::File::open_set(p);
        } catch (const gguf::Error& e) {
            return e.what();
        }
        return "(opened)";
    }

    fs::path dir_;
    std::optional<gguf::File> whole_;
    std::vector<gguf::Writer> writers_;
};

TEST(SplitName, ParsesAndFormatsTheSuffix) {
    const auto n = gguf::parse_split_name("/a/b/Model-7B-Q4_0-00002-of-00003.gguf");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->prefix, fs::path("/a/b/Model-7B-Q4_0"));
    EXPECT_EQ(n->no, 1u);
    EXPECT_EQ(n->count, 3u);
    EXPECT_EQ(gguf::split_path(n->prefix, 1, 3),
              fs::path("/a/b/Model-7B-Q4_0-00002-of-00003.gguf"));
    EXPECT_FALSE(gguf::parse_split_name("m.gguf"));
    EXPECT_FALSE(gguf::parse_split_name("m-00004-of-00003.gguf"));  // past the count
    EXPECT_FALSE(gguf::parse_split_name("m-00000-of-00003.gguf"));  // numbered from 1
    EXPECT_FALSE(gguf::parse_split_name("m-0001-of-00003.gguf"));   // five digits
    EXPECT_FALSE(gguf::parse_split_name("-00001-of-00003.gguf"));   // no prefix
    EXPECT_FALSE(gguf::parse_split_name("m-00001-of-00003.bin"));
}

TEST_F(SplitSet, OpensAsOneFileWithEveryTensorFromItsOwnFile) {
    ASSERT_EQ(writers_.size(), 3u);
    write_all();
    for (uint32_t entry = 0; entry < 3; ++entry) {  // through any of its files
        const gguf::File f = gguf::File::open_set(path(entry));
        EXPECT_EQ(f.name(), path(0).string());
        EXPECT_EQ(f.architecture(), "llama");
        EXPECT_EQ(f.get<std::string>("general.name"), "split test");
        EXPECT_EQ(f.get<uint32_t>(gguf::kSplitCountKey), 3u);
        ASSERT_EQ(f.tensors().size(), 7u);
        for (const gguf::TensorInfo& w : whole_->tensors()) {
            const gguf::TensorInfo& t = f.tensor(w.name);
            EXPECT_EQ(t.shape_string(), w.shape_string());
            ASSERT_EQ(t.n_bytes, w.n_bytes);
            EXPECT_EQ(std::memcmp(t.data, w.data, w.n_bytes), 0) << w.name;
        }
        EXPECT_EQ(f.tensor("blk.0.w").shard, 0u);
        EXPECT_EQ(f.tensor("blk.4.w").shard, 1u);
        EXPECT_EQ(f.tensor("blk.6.w").shard, 2u);
        const auto shards = f.shards();
        ASSERT_EQ(shards.size(), 3u);
        EXPECT_EQ(shards[2].name, path(2).string());
        EXPECT_EQ(shards[0].tensor_count + shards[1].tensor_count + shards[2].tensor_count, 7u);
        EXPECT_EQ(shards[1].size, fs::file_size(path(1)));
    }
}

TEST_F(SplitSet, AFileThatIsNotSplitOpensAsItself) {
    const fs::path p = dir_ / "single.gguf";
    model_writer().write(p);
    const gguf::File f = gguf::File::open_set(p);
    EXPECT_EQ(f.tensors().size(), 7u);
    EXPECT_EQ(f.shards().size(), 1u);
}

TEST_F(SplitSet, ALaterFileAloneIsRefusedSayingWhatItIs) {
    write_all();
    try {
        gguf::File::open(path(1));
        FAIL() << "opened";
    } catch (const gguf::Error& e) {
        EXPECT_NE(std::string(e.what()).find("file 2 of a split model"), std::string::npos)
            << e.what();
    }
}

TEST_F(SplitSet, AMissingFileIsNamed) {
    write_all();
    fs::remove(path(2));
    const std::string e = open_error(path(0));
    EXPECT_NE(e.find("file 3 of 3 is missing"), std::string::npos) << e;
    EXPECT_NE(e.find(path(2).filename().string()), std::string::npos) << e;
}

TEST_F(SplitSet, ACountThatDisagreesIsRefused) {
    writers_[1].set(gguf::kSplitCountKey, uint16_t{4});
    write_all();
    const std::string e = open_error(path(0));
    EXPECT_NE(e.find("says it is file 2 of 4"), std::string::npos) << e;
}

TEST_F(SplitSet, AWrongSplitNoIsRefused) {
    writers_[2].set(gguf::kSplitNoKey, uint16_t{1});
    write_all();
    const std::string e = open_error(path(0));
    EXPECT_NE(e.find("says it is file 2 of 3"), std::string::npos) << e;
    EXPECT_NE(e.find("expects file 3 of 3"), std::string::npos) << e;
}

TEST_F(SplitSet, ANameThatDisagreesWithTheKeysIsRefused) {
    write_all();
    const fs::path renamed = gguf::split_path(prefix(), 0, 2);
    fs::copy_file(path(0), renamed);
    const std::string e = open_error(renamed);
    EXPECT_NE(e.find("named file 1 of 2"), std::string::npos) << e;
}

TEST_F(SplitSet, AFileNamedOutsideTheConventionCannotFindItsSet) {
    write_all();
    const fs::path renamed = dir_ / "first.gguf";
    fs::copy_file(path(0), renamed);
    const std::string e = open_error(renamed);
    EXPECT_NE(e.find("cannot be found"), std::string::npos) << e;
}

TEST_F(SplitSet, ADuplicateTensorIsRefused) {
    std::vector<float> v(8 * 5, 0.0f);
    writers_[2].add_tensor("blk.4.w", {8, 5}, v);  // also in file 2
    writers_[2].set(gguf::kSplitTensorsCountKey, int32_t{8});
    for (auto& w : writers_) w.set(gguf::kSplitTensorsCountKey, int32_t{8});
    write_all();
    const std::string e = open_error(path(0));
    EXPECT_NE(e.find("tensor 'blk.4.w' is in file 2 and again in file 3"), std::string::npos) << e;
}

TEST_F(SplitSet, ATensorCountThatDisagreesIsRefused) {
    for (auto& w : writers_) w.set(gguf::kSplitTensorsCountKey, int32_t{8});
    write_all();
    const std::string e = open_error(path(0));
    EXPECT_NE(e.find("split.tensors.count is 8 but its files hold 7"), std::string::npos) << e;
}

TEST_F(SplitSet, IncompleteOrImpossibleKeysAreRefused) {
    writers_[0].erase(gguf::kSplitTensorsCountKey);
    write_all();
    EXPECT_NE(open_error(path(0)).find("split metadata is incomplete"), std::string::npos);
    writers_[0].set(gguf::kSplitTensorsCountKey, int32_t{7});
    writers_[0].set(gguf::kSplitNoKey, uint16_t{3});
    write_all();
    EXPECT_NE(open_error(path(0)).find("split.no 3 is not below split.count 3"), std::string::npos);
}

TEST_F(SplitSet, ATruncatedLaterFileIsRefused) {
    write_all();
    fs::resize_file(path(1), fs::file_size(path(1)) - 16);
    const std::string e = open_error(path(0));
    EXPECT_NE(e.find(path(1).string()), std::string::npos) << e;
    EXPECT_NE(e.find("outside the data section"), std::string::npos) << e;
}

}  // namespace

namespace {

TEST_F(SplitSet, InspectShowsTheSetAndWhereEachTensorIs) {
    write_all();
    const gguf::File f = gguf::File::open_set(path(1));
    const std::string text = gguf::describe_text(f);
    EXPECT_NE(text.find("split over 3 files"), std::string::npos) << text;
    EXPECT_NE(text.find(path(2).string()), std::string::npos) << text;
    const auto doc = gguf::describe_json(f);
    ASSERT_EQ(doc["split"].size(), 3u);
    EXPECT_EQ(doc["split"][1]["tensor_count"], 3);
    EXPECT_EQ(doc["tensors"][6]["name"], "blk.6.w");
    EXPECT_EQ(doc["tensors"][6]["file"], 3);
    EXPECT_FALSE(gguf::describe_json(*whole_).contains("split"));
}

}  // namespace
