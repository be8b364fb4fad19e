-- Fair share and usage accounting, written by the scheduler leader (controlplane/service/
-- usage_accounting.h): each tenant's usage history as decayed slot-seconds per slot type (it
-- halves every fair-share half-life), when it was last advanced, and plain slot-seconds per
-- tenant, submitting token and UTC day for usage reports.
CREATE TABLE fair_share (
  tenant_id             bigint NOT NULL REFERENCES tenants(id),
  slot_type             text NOT NULL CHECK (slot_type IN ('cpu', 'gpu')),
  decayed_slot_seconds  double precision NOT NULL CHECK (decayed_slot_seconds >= 0),
  PRIMARY KEY (tenant_id, slot_type)
);

-- One row: the time the history above was last advanced to.
CREATE TABLE fair_share_clock (
  only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  accrued_at  timestamptz NOT NULL
);

CREATE TABLE usage_daily (
  tenant_id     bigint NOT NULL REFERENCES tenants(id),
  token_id      bigint NOT NULL,  -- the token that submitted the jobs; 0: not known
  day           date NOT NULL,    -- UTC
  slot_type     text NOT NULL CHECK (slot_type IN ('cpu', 'gpu')),
  slot_seconds  double precision NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, day, token_id, slot_type)
);
