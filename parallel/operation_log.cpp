// The operation log: channel counters and the list of operations this rank is blocked in.
#include "parallel/operation_log.h"

#include <algorithm>

#include "framework/check.h"

namespace gpt {

OperationLog::Wait::Wait(OperationLog& log, const OperationTicket& ticket) : log_(log) {
  std::lock_guard<std::mutex> lock(log_.mutex_);
  id_ = log_.next_wait_id_++;
  log_.blocked_.push_back({id_, ticket, Clock::now()});
}

OperationLog::Wait::~Wait() {
  std::lock_guard<std::mutex> lock(log_.mutex_);
  auto& blocked = log_.blocked_;
  blocked.erase(std::remove_if(blocked.begin(), blocked.end(),
                               [this](const Blocked& b) { return b.id == id_; }),
                blocked.end());
}

int OperationLog::channel(const std::string& name, const std::vector<int>& members) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = std::find(names_.begin(), names_.end(), name);
  if (found != names_.end()) return static_cast<int>(found - names_.begin());
  names_.push_back(name);
  channels_.push_back({members, 0});
  return static_cast<int>(names_.size()) - 1;
}

OperationTicket OperationLog::issue(int channel, const char* op) {
  std::lock_guard<std::mutex> lock(mutex_);
  GPT_CHECK(channel >= 0 && channel < static_cast<int>(channels_.size()),
            "operation on unknown channel " << channel);
  return {channel, op, ++channels_[static_cast<size_t>(channel)].issued};
}

OperationSnapshot OperationLog::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  OperationSnapshot s;
  for (size_t i = 0; i < names_.size(); ++i) s.channels[names_[i]] = channels_[i];
  const Clock::time_point now = Clock::now();
  for (const Blocked& b : blocked_)  // in the order the waits began
    s.blocked.push_back({names_[static_cast<size_t>(b.ticket.channel)], b.ticket.op, b.ticket.seq,
                         std::chrono::duration<double>(now - b.since).count()});
  return s;
}

std::string channel_name(const std::string& group, const std::vector<int>& members) {
  std::string out = group + "[";
  for (size_t i = 0; i < members.size();) {
    size_t j = i;
    while (j + 1 < members.size() && members[j + 1] == members[j] + 1) ++j;
    if (i > 0) out += ",";
    out += std::to_string(members[i]);
    if (j > i) {
      out.push_back(j == i + 1 ? ',' : '-');
      out += std::to_string(members[j]);
    }
    i = j + 1;
  }
  return out + "]";
}

std::string message_channel_name(const std::string& group, int from, int to) {
  return group + "[" + std::to_string(from) + ">" + std::to_string(to) + "]";
}

}  // namespace gpt
