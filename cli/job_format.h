// Jobs and their events as the CLI prints them (`embody ls`, `show`, `events`), from the API's
// views (api/v1/job.h). The progress line of `embody watch` is format.h's.
#pragma once

#include <string>

#include "api/v1/job.h"

namespace cli {

// `embody ls`: ID, NAME, KIND, STATE, STEP ("70/200", "70", or "-" before the first step),
// CREATED and REASON, one row per job of the page.
std::string JobsTable(const api::v1::JobList& page);

// `embody show`: the job as indented JSON, then the lines a person looks for first (how long
// it waited for its start) and where its launch spent its time when the server says.
std::string JobDetail(const api::v1::Job& job);

// `embody events`: "TIME  TYPE  DATA" per event, the data as compact JSON.
std::string EventsText(const api::v1::EventList& events);

}  // namespace cli
