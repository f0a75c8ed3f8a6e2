// The watchdog's report: heartbeats to and from JSON, and the culprit analysis (stall_report.h).
#include "parallel/stall_report.h"

#include <cstdio>
#include <map>

namespace gpt {
namespace {

// How strongly a rank is suspected: a rank that stopped beating explains every wait on it; one
// that never reached the operation and is not communicating is stuck in its own work; one that
// is itself waiting only passes the stall on.
enum class Suspicion { kSilent = 0, kBusyElsewhere = 1, kWaitingOnOthers = 2 };

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

std::string who(int rank, const std::optional<Heartbeat>& heartbeat) {
  std::string out = "rank " + std::to_string(rank);
  if (!heartbeat) return out;
  const GridCoordinates& c = heartbeat->coordinates;
  return out + " (tp " + std::to_string(c.tp_rank) + ", dp " + std::to_string(c.dp_rank) +
         ", stage " + std::to_string(c.stage) + ", host " + heartbeat->host + ", pid " +
         std::to_string(heartbeat->pid) + ")";
}

std::string describe(const BlockedOperation& b) {
  return b.channel + " " + b.op + " #" + std::to_string(b.seq);
}

int64_t issued_on(const Heartbeat& heartbeat, const std::string& channel) {
  const auto it = heartbeat.operations.channels.find(channel);
  return it == heartbeat.operations.channels.end() ? 0 : it->second.issued;
}

struct Suspect {
  Suspicion level;
  std::string reason;
};

// Why `member` may be the reason `waiting` is stuck in op, or nothing when it is not.
std::optional<Suspect> suspect(const RankEvidence& member, const BlockedOperation& op, double now) {
  if (!member.heartbeat)
    return Suspect{Suspicion::kSilent,
                   "no heartbeat of this job: it never started its watchdog, or the watchdog "
                   "directory is not shared between the nodes"};
  const Heartbeat& h = *member.heartbeat;
  const int64_t issued = issued_on(h, op.channel);
  const std::string reached = "reached " + op.channel + " #" + std::to_string(issued) +
                              " of the #" + std::to_string(op.seq) + " awaited";
  const bool waiting = !h.operations.blocked.empty();
  const std::string doing =
      waiting ? "in " + describe(h.operations.blocked.front()) : "not communicating";
  if (!member.beating)
    return Suspect{Suspicion::kSilent, "no heartbeat for " + seconds(now - h.unix_time) +
                                           " (stopped, or its process hangs); when last seen it "
                                           "had " +
                                           reached + " and was " + doing};
  if (issued >= op.seq) return std::nullopt;
  return Suspect{waiting ? Suspicion::kWaitingOnOthers : Suspicion::kBusyElsewhere,
                 "alive, but has only " + reached + "; it is " + doing +
                     (waiting ? "" : " (computing, or hung outside communication)")};
}

}  // namespace

Json heartbeat_to_json(const Heartbeat& h) {
  Json channels = Json::object();
  for (const auto& [name, state] : h.operations.channels)
    channels[name] = {{"members", state.members}, {"issued", state.issued}};
  Json blocked = Json::array();
  for (const BlockedOperation& b : h.operations.blocked)
    blocked.push_back(
        {{"channel", b.channel}, {"op", b.op}, {"seq", b.seq}, {"waited_s", b.waited_s}});
  return {{"job", h.job},
          {"rank", h.rank},
          {"tp_rank", h.coordinates.tp_rank},
          {"dp_rank", h.coordinates.dp_rank},
          {"stage", h.coordinates.stage},
          {"host", h.host},
          {"pid", h.pid},
          {"beat", h.beat},
          {"unix_time", h.unix_time},
          {"timed_out", h.timed_out},
          {"channels", channels},
          {"blocked", blocked}};
}

Heartbeat heartbeat_from_json(const Json& json, const std::string& what) {
  Heartbeat h;
  h.job = json_field<std::string>(json, "job", what);
  h.rank = json_field<int>(json, "rank", what);
  h.coordinates = {json_field<int>(json, "tp_rank", what), json_field<int>(json, "dp_rank", what),
                   json_field<int>(json, "stage", what)};
  h.host = json_field<std::string>(json, "host", what);
  h.pid = json_field<int64_t>(json, "pid", what);
  h.beat = json_field<int64_t>(json, "beat", what);
  h.unix_time = json_field<double>(json, "unix_time", what);
  h.timed_out = json_field<bool>(json, "timed_out", what);
  const Json channels = json_field<Json>(json, "channels", what);
  const Json blocked = json_field<Json>(json, "blocked", what);
  GPT_INPUT_CHECK(channels.is_object() && blocked.is_array(), what << " is not a heartbeat");
  for (const auto& [name, state] : channels.items())
    h.operations.channels[name] = {json_field<std::vector<int>>(state, "members", what),
                                   json_field<int64_t>(state, "issued", what)};
  for (const Json& b : blocked)
    h.operations.blocked.push_back(
        {json_field<std::string>(b, "channel", what), json_field<std::string>(b, "op", what),
         json_field<int64_t>(b, "seq", what), json_field<double>(b, "waited_s", what)});
  return h;
}

std::vector<std::string> stall_report(const std::vector<RankEvidence>& evidence, double timeout_s,
                                      double now) {
  std::vector<std::string> lines;
  std::map<int, Suspect> suspects;  // by rank: the strongest suspicion
  for (size_t r = 0; r < evidence.size(); ++r) {
    const std::optional<Heartbeat>& h = evidence[r].heartbeat;
    if (!h || h->operations.blocked.empty() || !evidence[r].beating) continue;  // silent: below
    const BlockedOperation& op = h->operations.blocked.front();
    lines.push_back(who(static_cast<int>(r), h) + (h->timed_out ? " timed out" : " waiting") +
                    " in " + describe(op) + " after " + seconds(op.waited_s));
    if (op.waited_s < timeout_s) continue;
    const auto channel = h->operations.channels.find(op.channel);
    if (channel == h->operations.channels.end()) continue;
    for (int member : channel->second.members) {
      if (member == static_cast<int>(r) || member < 0 ||
          member >= static_cast<int>(evidence.size()))
        continue;
      const std::optional<Suspect> s = suspect(evidence[static_cast<size_t>(member)], op, now);
      if (s && (!suspects.count(member) || s->level < suspects.at(member).level))
        suspects[member] = *s;
    }
  }
  Suspicion strongest = Suspicion::kWaitingOnOthers;
  for (const auto& [rank, s] : suspects) strongest = std::min(strongest, s.level);
  for (const auto& [rank, s] : suspects) {
    if (s.level != strongest) continue;
    const char* title =
        s.level == Suspicion::kWaitingOnOthers ? "not reached by " : "likely culprit: ";
    lines.push_back(title + who(rank, evidence[static_cast<size_t>(rank)].heartbeat) + ": " +
                    s.reason);
  }
  if (suspects.empty())
    lines.push_back(
        "no culprit found: every rank of the channel reached the operation (a transport "
        "failure, or ranks that issued different operations)");
  return lines;
}

}  // namespace gpt
