# frozen_string_literal: true

class Row < ActiveRecord::Base
end
